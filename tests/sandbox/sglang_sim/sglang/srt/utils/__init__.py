"""Process plumbing shared by the simulator's processes (stdlib only); 0.5.23 keeps these in
``sglang/srt/utils/common.py`` and re-exports them from ``sglang.srt.utils``."""
from sglang.srt.utils.common import (  # noqa: F401
    configure_logger, get_exception_traceback, gib, kill_itself_when_parent_died, kill_process_tree, set_comm)
