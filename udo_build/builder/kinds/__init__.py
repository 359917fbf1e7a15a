"""The built-in action kinds. Importing this package registers them; each kind imports its heavy
modules (lxml, onnx, numpy, the emulator) only when it runs, so a no-op build imports none."""

from ..actions import read_as_set
from . import assemble, check, convert, opdef, package, prepare, quantize, run  # noqa: F401

# the deployable bundle is a function of the set of distinct records (equal records of two SoCs
# with the same arch and VTCM, or another order, key the same); to move into assemble's
# registration as `set_inputs=("record",)`
read_as_set("assemble", "record")
