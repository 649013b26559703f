"""The catalogue: every named variant, its recipe, and the trained weights that ship.

`registry` (every name's spec, `list_models`, `get_spec`, the shipped list), `recipe` (the one
`Recipe` type: how a variant trains), `build` (an untrained model of a name), `download`
(weights by name: clone, cache or URL), `loading` (`tt_zoo.load`, `ZooModel`, `TextIndex`,
`tt_zoo.load_term_weighter`), `kind_models` (what `load` gives for ColBERT and HDCT models,
and their saved indexes) and `shipping` (an export listed under its name, with its card).
"""
