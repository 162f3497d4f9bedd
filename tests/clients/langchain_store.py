"""LangChain's PGVector store over pgvector's column type, searched by a
milvus index through the companion (run by tests/test_clients.py in the
LangChain venv; DATABASE_URL names the database)."""

import hashlib
import json
import os
import sys

from langchain_core.embeddings import Embeddings
from langchain_postgres import PGVector

DIMS = 16


class HashEmbeddings(Embeddings):
    """Deterministic embeddings: a text's SHA-256 as 16 numbers."""

    def embed_query(self, text):
        digest = hashlib.sha256(text.encode()).digest()
        return [b / 255 - 0.5 for b in digest[:DIMS]]

    def embed_documents(self, texts):
        return [self.embed_query(t) for t in texts]


url = os.environ["DATABASE_URL"].replace("postgresql://", "postgresql+psycopg://")
store = PGVector(embeddings=HashEmbeddings(), collection_name="docs", connection=url, embedding_length=DIMS,
                 use_jsonb=True)
step = sys.argv[1]
if step == "load":
    texts = [f"document {i}" for i in range(500)]
    store.add_texts(texts, metadatas=[{"parity": i % 2} for i in range(500)], ids=[str(i) for i in range(500)])
else:
    found = store.similarity_search("document 7", k=5)
    filtered = store.similarity_search("document 7", k=5, filter={"parity": {"$eq": 1}})
    print(json.dumps({"found": [d.id for d in found], "filtered": [d.id for d in filtered]}))
