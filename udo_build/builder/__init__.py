"""The build: plan a recipe into actions, run them against the store, report what happened.

`session` is the library under the command line (`run_build`, `explain_build`), with
`transfer` (cache push/pull) and `generate` (op packages without a recipe) beside it; `plan`
turns a recipe into actions, `engine` schedules them, `executors` say where they run (`cluster`:
on a Dask cluster), `execute` runs one, `kinds` are the action kinds; `shards` splits a build
across CI runners (`--shard K/N`); `history`, `outputs` and `explain` record, publish and explain
a build; `settings` opens the remote tier. Nothing here prints.
"""
