"""The parent's TokenizerManager, as far as start-up goes (SGLang 0.5.23 ``managers/tokenizer_manager.py``).

``Engine._launch_subprocesses`` builds it after spawning the schedulers and the detokenizer and before waiting for
the schedulers: it loads the processor (Kimi-K2.5 is multimodal: ``init_tokenizer_and_processor`` ->
``get_processor_wrapper`` -> ``utils/hf_transformers/processor.py get_processor``). A failure there is an uncaught
exception in the parent: Python prints the traceback, ``launch_server.py``'s ``finally`` kills the children and the
process exits 1.
"""
from sglang.srt.utils.hf_transformers.processor import get_processor


def get_processor_wrapper(server_args):
    return get_processor(server_args.tokenizer_path or server_args.model_path,
                         trust_remote_code=server_args.trust_remote_code)


class TokenizerManager:
    def __init__(self, server_args):
        self.server_args = server_args
        self.init_tokenizer_and_processor()

    def init_tokenizer_and_processor(self):
        self.processor = get_processor_wrapper(self.server_args)
