-- Dense vectors of code chunks. Content-addressed: one row per (model, embedding text), so a
-- chunk whose text comes back (an undo, a branch switch, a file moved back) finds its vector
-- without running the model again; the table doubles as the embedding cache. Rows no chunk
-- refers to any more stay until pruned.

-- First 16 bytes of SHA-256 of the chunk's embedding text (`code::embedding_text`); NULL for
-- rows written before v4 (the embedding job fills them in).
ALTER TABLE code_chunks ADD COLUMN embed_hash BLOB;
CREATE INDEX code_chunks_embed_hash ON code_chunks(embed_hash);

CREATE TABLE code_vectors (
  id          INTEGER PRIMARY KEY,
  embedder    TEXT    NOT NULL,   -- EmbedderId key: provider:model:dims
  text_hash   BLOB    NOT NULL,
  vector      BLOB    NOT NULL,   -- dims x f32, little-endian
  created_at  INTEGER NOT NULL,
  UNIQUE (embedder, text_hash)
);

-- Every chunk whose vector may have changed: inserted, deleted, re-hashed, or its text given
-- (or denied) a vector. In-memory indexes replay it from the last seq they saw, so writes from
-- any path, thread or process reach them. Trimmed from the bottom only, so seqs stay
-- contiguous and a reader can tell when it fell behind the trim (it then reloads).
CREATE TABLE code_vector_log (
  seq       INTEGER PRIMARY KEY AUTOINCREMENT,
  chunk_id  INTEGER NOT NULL
);

CREATE TRIGGER code_chunks_log_insert AFTER INSERT ON code_chunks BEGIN
  INSERT INTO code_vector_log (chunk_id) VALUES (new.id);
END;
CREATE TRIGGER code_chunks_log_delete AFTER DELETE ON code_chunks BEGIN
  INSERT INTO code_vector_log (chunk_id) VALUES (old.id);
END;
CREATE TRIGGER code_chunks_log_rehash AFTER UPDATE OF embed_hash ON code_chunks
WHEN old.embed_hash IS NOT new.embed_hash BEGIN
  INSERT INTO code_vector_log (chunk_id) VALUES (new.id);
END;
CREATE TRIGGER code_vectors_log_insert AFTER INSERT ON code_vectors BEGIN
  INSERT INTO code_vector_log (chunk_id)
    SELECT id FROM code_chunks WHERE embed_hash = new.text_hash;
END;
CREATE TRIGGER code_vectors_log_delete AFTER DELETE ON code_vectors BEGIN
  INSERT INTO code_vector_log (chunk_id)
    SELECT id FROM code_chunks WHERE embed_hash = old.text_hash;
END;
