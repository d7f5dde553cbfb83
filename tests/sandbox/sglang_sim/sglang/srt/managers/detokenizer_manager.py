"""The detokenizer process (SGLang 0.5.23 ``managers/detokenizer_manager.py run_detokenizer_process``): its own
logger without a rank prefix, a tokenizer of its own, and on an exception ``DetokenizerManager hit an exception:
<traceback>`` then SIGQUIT to the parent."""
import logging
import os
import signal

from sglang.srt.utils import get_exception_traceback
from sglang.srt.utils.hf_transformers.processor import get_processor

logger = logging.getLogger(__name__)


def run_detokenizer_process(cfg, ready_fd, ctl_fd):
    parent = os.getppid()
    try:
        get_processor(cfg["tokenizer_path"], trust_remote_code=cfg["trust_remote_code"])
        os.write(ready_fd, b'{"status": "ready"}\n')
        with os.fdopen(ctl_fd, "r") as ctl:
            for line in ctl:
                if line.strip() == "shutdown":
                    break
    except Exception:
        traceback = get_exception_traceback()
        logger.error(f"DetokenizerManager hit an exception: {traceback}")
        os.kill(parent, signal.SIGQUIT)
