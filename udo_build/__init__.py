"""udo-build: declarative, incremental builds of networks with custom ops for HTP NPUs.

ARCHITECTURE

The package is in layers. A module imports only from its own layer and the layers below it,
never up (not even inside a function), and the folders of one layer import each other without
a cycle; `tests/test_layers.py` reads every import of the code and fails otherwise.

    cli/        the command line: parses arguments, calls the library, prints through its one
                reporter (the only code that prints)
    builder/    the library under the CLI: session.run_build (one build of a recipe, returning
                a BuildReport, defined in outcome with ActionOutcome, what a replayed no-op
                also returns; build, explain, cache and package share its pieces), plan (a
                recipe -> actions), engine (schedules actions over the store and the remote
                cache), kinds/ (one thin adapter per action kind: read inputs, call a stage,
                write outputs), history, explain, outputs (the output folder), transfer
                (cache push/pull), generate (packages without a recipe), scaffold (`init`: op
                configs, kernels stubs and a recipe from a model), settings (remote)
    stages      recipe/ (schema, loading, the prepare matrix), opdef/ (op configs -> op
                definitions), package/ (op package sources per backend), model/ (ONNX import,
                input lists, model info), quant/ (calibration, quantizers, folding, QDQ
                export), compiler/ (bundle -> HTP cache record: lowering, rule passes,
                selection, memory planning, the record format, serve: the record a run
                loads or prepares online; partition: the HTP and CPU subnets, subnets and
                subnet_run: preparing and running them; parts: the cuts of the HTP subnets
                into parts under a limit on record bytes)
    runtime/    the emulator's float session and integer session; choosing the record a run
                loads (records.py), the run metrics and checks (metrics.py), writing results,
                pool (runs over many inputs spread over worker processes, results in order)
    kernels/    the op package API (OpPackage, Cost, Flags), the default package's numpy
                kernels, loading the kernels files of a recipe, native (a compiled CPU op
                package's ops called through ctypes), blas (numpy's own BLAS called directly:
                GEMMs that accumulate into their output and read strided operands in place;
                its thread count), compiled (the emulator's own hot passes in C, c/*.c,
                compiled on first use into a per-user cache and called through ctypes)
    store/remote/
                the remote tier of the store (tier.py: fetch and publish) and what only it
                uses: the transports (http, grpc, s3) and their interface (transport.py),
                connect (a URL -> its transport), the REAPI entries (entries, reapi), trust
                (signatures), deadlines, pools. It sits above the local store: store/ knows
                it only as `store.Tier` and never imports it
    ir/, rewrite/, soc/, store/
                ir/: the model graph, the bundle container, encodings and the quantized model;
                rewrite/: the op graph the rules rewrite, patterns, replacements and the one
                rewrite driver; soc/: the SoC table, the record compatibility rules and the
                compile target (arch, VTCM, level, dims, outputs, precision); store/ (the
                local store): blobs, trees and files of parts (parts.py), the action cache,
                locks, counters, history, maintenance
    base        errors, canonical (canonical JSON and digests), source (reading user files with
                positions), atomic (the one atomic-write path), schema_problems

Where things go:

- a new action kind: a module in builder/kinds/ registered with
  `builder.actions.action_kind(name, version=..., params=Params.KEY_PARAMS)`, its parameters
  one frozen type next to the stage it drives (with from_params/to_params, like
  quant/settings.py or soc/target.py), its work in a stage; the planner (builder/plan.py)
  creates its actions. Site-specific kinds come as plugins
  (`UDO_BUILD_PLUGINS`).
- a new op of the emulator: a kernel in the matching family module of kernels/default/ (float),
  and, where the device computes it in integers, a kernel and its binder in runtime/integer/.
- a new rewrite rule: a `Rule` value in a rule list (compiler/ for the HTP passes, rewrite/ for
  the folds every layer shares); users add theirs with `package.rule(...)` in a kernels file.
- a new cache backend: a transport module in store/remote/ (the `transport.Transport`
  interface, its requests run through `transport.Breaker`), picked by URL scheme in
  `store/remote/connect.py`; its settings in builder/settings.py.
- a new command: a module in cli/ (add_arguments, run), listed in cli/__init__.py, calling the
  library in builder/ or a stage.
"""

__version__ = "0.1.0"
