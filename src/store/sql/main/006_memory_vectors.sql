-- Dense vectors of memories, one per (memory, model). They live with the memories (and sync with
-- them); a memory whose embedded text changes loses its vectors and is embedded again.
CREATE TABLE memory_vectors (
  id          INTEGER PRIMARY KEY,
  memory_seq  INTEGER NOT NULL REFERENCES memories(seq) ON DELETE CASCADE,
  embedder    TEXT    NOT NULL,   -- EmbedderId key: provider:model:dims
  text_hash   BLOB    NOT NULL,   -- first 16 bytes of SHA-256 of the embedding text
  vector      BLOB    NOT NULL,   -- dims x f32, little-endian
  created_at  INTEGER NOT NULL,
  UNIQUE (memory_seq, embedder)
);

-- The fields the embedding text is built from (memory::embedding_text).
CREATE TRIGGER memories_vectors_stale
AFTER UPDATE OF content, type, related_files, related_modules ON memories
WHEN old.content IS NOT new.content OR old.type IS NOT new.type
  OR old.related_files IS NOT new.related_files OR old.related_modules IS NOT new.related_modules
BEGIN
  DELETE FROM memory_vectors WHERE memory_seq = new.seq;
END;

-- Every memory whose place in the vector indexes may have changed (see code_vector_log).
CREATE TABLE memory_vector_log (
  seq         INTEGER PRIMARY KEY AUTOINCREMENT,
  memory_seq  INTEGER NOT NULL
);

CREATE TRIGGER memory_vectors_log_insert AFTER INSERT ON memory_vectors BEGIN
  INSERT INTO memory_vector_log (memory_seq) VALUES (new.memory_seq);
END;
CREATE TRIGGER memory_vectors_log_delete AFTER DELETE ON memory_vectors BEGIN
  INSERT INTO memory_vector_log (memory_seq) VALUES (old.memory_seq);
END;
CREATE TRIGGER memories_log_deprecated AFTER UPDATE OF deprecated ON memories
WHEN old.deprecated IS NOT new.deprecated BEGIN
  INSERT INTO memory_vector_log (memory_seq) VALUES (new.seq);
END;
CREATE TRIGGER memories_log_delete AFTER DELETE ON memories BEGIN
  INSERT INTO memory_vector_log (memory_seq) VALUES (old.seq);
END;
