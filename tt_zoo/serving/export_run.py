"""What `tt-zoo export` writes of a loaded model: its serving SavedModel with its card
(`tt_zoo.artifacts.export.export_saved_model`), and over a corpus of passages a ScaNN or
brute-force index (`tt_zoo.retrieval.index.EmbeddingIndex`, saved with ScaNN's own serializer)
and a `retrieve` SavedModel, query string -> top-k ids and scores (`tt_zoo.serving.retrieve`).
The model comes from `tt_zoo.load` or, for a pretraining checkpoint,
`tt_zoo.zoo.build.restore_from_checkpoint`. Nothing here imports TensorFlow at import time.

    model = tt_zoo.load("ict_bfs_wlp_512")
    export_for_serving(model, corpus=read_texts("passages.jsonl", "passages"),
                       index_output="out/index", retrieve_output="out/retrieve", k=10)
"""

from __future__ import annotations

from typing import Callable, Optional

from tt_zoo.data.text_files import Texts


def export_for_serving(model, output: Optional[str] = None, corpus: Optional[Texts] = None, *,
                       index_output: Optional[str] = None, retrieve_output: Optional[str] = None,
                       backend: str = "scann", k: int = 10,
                       show_progress_bar: Optional[bool] = None,
                       log: Callable[[str], None] = print) -> None:
    """Writes, of a loaded two-tower `model` (a `tt_zoo.zoo.zoo_model.ZooModel`):

    - to `output`, its SavedModel and card (the card's sha256 becomes the new export's);
    - to `index_output`, an index (`backend`: "scann" or "brute_force") over the passages of
      `corpus`, encoded once (`show_progress_bar`: as `ZooModel.encode_documents`);
    - to `retrieve_output`, a `retrieve` SavedModel over the same embeddings, returning the top
      `k` of a query string.

    Logs a line for each. Raises FileExistsError where a folder it would replace holds
    something else.
    """
    from tt_zoo.artifacts.export import QueryEncoder, export_saved_model  # noqa: PLC0415
    from tt_zoo.serving.retrieve import export_retrieval_model  # noqa: PLC0415

    keras_model, meta = model.keras_model, dict(model.metadata)
    if output:
        meta.pop("sha256", None)
        written = export_saved_model(keras_model, output, meta)
        log(f"exported {output} (sha256 {written['sha256']}, "
            f"{written['parameters']:,} parameters)")
    if corpus is None or not (index_output or retrieve_output):
        return
    ids, titles, texts = corpus.ids_or_positions(), corpus.titles, corpus.texts
    embeddings = model.encode_documents(texts, titles=titles,
                                        show_progress_bar=show_progress_bar)
    index = model.index(texts, titles=titles, ids=ids, backend=backend, embeddings=embeddings)
    log(f"indexed {len(index):,} documents with {backend}")
    if index_output:
        index.save(index_output)
        log(f"saved index to {index_output}")
    if retrieve_output:
        export_retrieval_model(QueryEncoder(keras_model), embeddings, ids, retrieve_output,
                               k=k, backend=backend)
        log(f"exported retrieve SavedModel ({backend}, k={k}) to {retrieve_output}")
