-- Dense vectors of code chunks. Content-addressed: one row per (model, embedding text), so a
-- chunk whose text comes back (an undo, a branch switch, a file moved back) finds its vector
-- without running the model again; the table doubles as the embedding cache. Rows no chunk
-- refers to any more stay until pruned.

-- First 16 bytes of SHA-256 of the chunk's embedding text (`code::embedding_text`); NULL for
-- rows written before v4 (the embedding job fills them in). Not indexed: an index on random
-- hashes cost ~8% of a cold index (every batch dirtied most of its pages).
ALTER TABLE code_chunks ADD COLUMN embed_hash BLOB;

CREATE TABLE code_vectors (
  id          INTEGER PRIMARY KEY,
  embedder    TEXT    NOT NULL,   -- EmbedderId key: provider:model:dims
  text_hash   BLOB    NOT NULL,
  vector      BLOB    NOT NULL,   -- dims x f32, little-endian
  created_at  INTEGER NOT NULL,
  UNIQUE (embedder, text_hash)
);

-- What changed for the in-memory vector indexes, replayed from the last seq they saw, so
-- writes from any path, thread or process reach them. A row names either a range of chunk ids
-- (inserted, deleted or re-hashed: the indexer's batch writer logs one range per file, because
-- a trigger per chunk cost ~15% of a cold index) or a text hash whose vector was stored or
-- dropped (by trigger). Ranges may over-cover: readers re-read whatever a range names.
-- Trimmed from the bottom only (the newest row always stays), so seqs only grow and a reader
-- can tell when it fell behind the trim (it then reloads).
CREATE TABLE code_vector_log (
  seq          INTEGER PRIMARY KEY,
  first_chunk  INTEGER,
  last_chunk   INTEGER,
  text_hash    BLOB
);

CREATE TRIGGER code_chunks_log_rehash AFTER UPDATE OF embed_hash ON code_chunks
WHEN old.embed_hash IS NOT new.embed_hash BEGIN
  INSERT INTO code_vector_log (first_chunk, last_chunk) VALUES (new.id, new.id);
END;
CREATE TRIGGER code_vectors_log_insert AFTER INSERT ON code_vectors BEGIN
  INSERT INTO code_vector_log (text_hash) VALUES (new.text_hash);
END;
CREATE TRIGGER code_vectors_log_delete AFTER DELETE ON code_vectors BEGIN
  INSERT INTO code_vector_log (text_hash) VALUES (old.text_hash);
END;
