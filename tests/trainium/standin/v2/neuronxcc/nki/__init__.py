"""Stand-in neuronxcc.nki of Neuron SDK 2.30+: the module still imports (AWS does not say it was removed), but
NKI 0.4.0 made using it inside a kernel a compilation error
(https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/_sources/nki/migration/index.rst)."""


class CompilationError(RuntimeError):
    pass


def _refuse(*args, **kwargs):
    raise CompilationError("neuronxcc.nki.* is not supported inside NKI kernels since NKI 0.4.0: use `import nki`")


jit = baremetal = benchmark = profile = _refuse
