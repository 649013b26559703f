"""The catalogue: every named variant, its recipe, and the trained weights that ship.

`registry` (every name's spec, `list_models`, `get_spec`, the shipped list; a name's recipe is
the run config of the command that trains it, `tt_zoo.configs`), `model_options` (the
`ModelOptions` of a series: pooling, tower sharing, score scale), `imported` (the public
checkpoints listed by name, built from their registry packages), `build` (an untrained model
of a name), `loading` (`tt_zoo.load`, `tt_zoo.load_term_weighter`: a name found in the
clone, the cache or a download, `tt_zoo.artifacts`), `zoo_model` (what `load` gives for a two-tower model:
`ZooModel`, `TextIndex`), `kind_models` (what `load` gives for ColBERT and HDCT models, and
their saved indexes) and `shipping` (an export listed under its name, with its card).
"""
