"""Store maintenance, the logic behind `udo-build store stats | verify | gc | ls` (no printing).

- `inventory`: counts (`stats`) and the action-cache list (`list_entries`);
- `check` (`verify`): every blob's digest, every entry, tree and history; `repair` fixes what
  it can (its docstring lists the failing and the informational findings);
- `collect` (`gc`): expire entries (by last use, or to fit a size), then mark and sweep the
  blobs from the entries left and the histories' outputs (the roots);
- `scan`: reading the store without side effects, shared by the three.
"""

from __future__ import annotations

from .check import FAILING, INFORMATIONAL, Finding, VerifyReport, verify
from .collect import GcOptions, GcReport, gc
from .inventory import Listed, Stats, list_entries, stats
from .scan import parse_size

__all__ = ["FAILING", "INFORMATIONAL", "Finding", "GcOptions", "GcReport", "Listed", "Stats",
           "VerifyReport", "gc", "list_entries", "parse_size", "stats", "verify"]
