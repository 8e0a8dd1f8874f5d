"""What rwb creates on a Milvus it does not own: collections that carry
:data:`MILVUS_PROPERTIES` (and :data:`MILVUS_MARK` as their description, where the server keeps
it); a build never takes a collection name that exists already, and drops only its own."""

MILVUS_MARK = "rwb-index: created by retrieval-workbench for one run; dropped with it"
#: collection properties of rwb's collections (Milvus Lite keeps these, not the description)
MILVUS_PROPERTIES = {"rwb.index": "1"}

__all__ = ["MILVUS_MARK", "MILVUS_PROPERTIES"]
