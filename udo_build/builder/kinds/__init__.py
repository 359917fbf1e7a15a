"""The built-in action kinds. Importing this package registers them; each kind imports its heavy
modules (lxml, onnx, numpy, the emulator) only when it runs, so a no-op build imports none."""

from . import (  # noqa: F401
    assemble,
    check,
    convert,
    mixed_precision,
    native_check,
    opdef,
    outputs,
    package,
    parts,
    prepare,
    quant_algorithms,
    quantize,
    run,
    runtimes,
    sequences,
)

