"""Chain keys: an action's key computed without the outputs of the actions upstream, so that a
fresh checkout can look a whole chain of actions up in the remote cache at once.

An action's key names its inputs by digest: a source file's, or an upstream output's, known only
once the upstream action is cached (its entry read) or built. Looked up level after level, a
fresh checkout of a deep plan (opdef -> packages -> convert -> quantize -> prepare -> assemble ->
run) waits for a round trip (an entry, then its envelope) per level before the next level's
lookups, and its downloads, can start. The chain key of an action names a source by its digest
and an upstream output by the upstream action's chain key and the output's name, so every chain
key of a plan is known from its sources alone; an action whose inputs are all sources has its
action key as chain key.

A build that uploads files each result it built under its chain key too (an index entry:
`store.remote.tier.Remote.upload`). A build whose root actions miss locally (a fresh checkout,
an edited source) asks for the chain key of every action downstream of such a root at once
(`Engine._look_ahead`), and uses a result found there only when its signed action key is the
one the build computes once the upstream results are known: the index says where to look,
never what to trust. A chain key without an entry, or with one made for another key (an
upstream action that gave other bytes), is looked up by its action key as before. The blobs of
a result found there start downloading at once, each verified by its digest (see
`Remote._fetch_ahead`): a fresh checkout downloads every level's outputs together instead of
each level's once the level above is resolved; its entry is stored once the keys agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from .actions import get_kind
from .plan import Plan, Source

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ..store import Store

CHAIN = "chain:"  # an upstream output as a chain key names it: chain:<its chain key>/<output>


class ChainKeys:
    """The chain keys of a plan's actions, each computed once (`digest` gives a source's
    digest, as the engine keys it)."""

    def __init__(self, plan: Plan, digest: Callable[[Source], str]) -> None:
        self.plan = plan
        self.digest = digest
        self._keys: dict[str, str | None] = {}

    def key(self, action_id: str) -> str | None:
        """The chain key of an action (None when its kind, or one upstream, is not available
        in this udo-build)."""
        if action_id in self._keys:
            return self._keys[action_id]
        action = self.plan.actions[action_id]
        kind = get_kind(action.kind)
        names: dict[str, str] = {}
        for name, source in action.inputs.items():
            if isinstance(source, Source):
                names[name] = self.digest(source)
                continue
            upstream = self.key(source.action)
            if upstream is None:
                kind = None
                break
            names[name] = f"{CHAIN}{upstream}/{source.output}"
        found = None
        if kind is not None:
            keyed = kind.keyed_names(names)
            found = kind.key(action.params, {n: names[p] for n, p in keyed.items()})
        self._keys[action_id] = found
        return found

    def index(self, action_id: str, key: str) -> tuple[str, ...]:
        """The index keys to file the result of `action_id` (action key `key`) under: its chain
        key when that is not its action key."""
        chain = self.key(action_id)
        return () if chain is None or chain == key else (chain,)


def look_ahead(store: Store, plan: Plan, chain: ChainKeys, download: str
               ) -> dict[str, tuple[Future[Any], bool]]:
    """Start the remote lookups of every action downstream of a root action (one whose inputs
    are all sources) that misses locally, by chain key, all at once: a fresh checkout then
    waits for one round of lookups, not one per level of its plan. Returns action id -> (its
    lookup, whether by an index key: a root's chain key is its action key, looked up and its
    blobs downloaded as any). Stops at a source that cannot be read (the build says so when
    it needs it), or when the remote is disabled."""
    early: dict[str, tuple[Future[Any], bool]] = {}
    for aid, key in doubtful_keys(store, plan, chain).items():
        action = plan.actions[aid]
        future = store.fetch(key, linked=lambda result, a=action: a.published(result).values(),
                             download=download, index=bool(action.deps))
        if future is None:
            break
        early[aid] = (future, bool(action.deps))
    return early


def doubtful_keys(store: Store, plan: Plan, chain: ChainKeys) -> dict[str, str]:
    """Action id -> chain key of every root action that misses locally and of every action
    downstream of one, in dependency order; up to a source that cannot be read. Every key is
    computed before any lookup starts: the sources are hashed in this thread alone (a lookup
    thread answered meanwhile takes the GIL from it at every read: at a load of 2, the digests
    took 185 ms beside the first lookups, 30 ms alone) and the lookups of every level go out
    together."""
    keys: dict[str, str] = {}
    doubtful: set[str] = set()  # a root that misses locally, or downstream of one
    for aid, action in plan.actions.items():  # in dependency order
        deps = action.deps
        if deps and doubtful.isdisjoint(deps):
            continue
        try:
            key = chain.key(aid)
        except UserError:
            break
        if key is None or not deps and store.ac.get(key) is not None:
            continue
        doubtful.add(aid)
        keys[aid] = key
    return keys
