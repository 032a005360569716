-- The definitions a grouped chunk (kind 'block') holds, and the members of a class or impl that
-- fit one chunk whole, each with its own vector. The chunker merges small neighbouring
-- definitions into one chunk for packing, and one vector for several functions found each of
-- them about half as well (go-doc dense MRR@10 0.334 on answers in a grouped chunk against 0.657
-- in a single-definition one). A dense hit on a part ranks its chunk and names the definition.
-- Rows go with their chunk; the vector index replays them through the chunk ranges of
-- `code_vector_log` (a part never changes without its chunk).
CREATE TABLE code_chunk_parts (
  chunk_id    INTEGER NOT NULL REFERENCES code_chunks(id) ON DELETE CASCADE,
  ordinal     INTEGER NOT NULL,
  kind        TEXT    NOT NULL,
  symbol      TEXT    NOT NULL,   -- qualified name
  start_line  INTEGER NOT NULL,
  end_line    INTEGER NOT NULL,
  start_off   INTEGER NOT NULL,   -- byte range of its text within the chunk's content
  end_off     INTEGER NOT NULL,
  context     TEXT    NOT NULL,   -- its own contextual prefix
  embed_hash  BLOB    NOT NULL,   -- key of its vector in code_vectors
  PRIMARY KEY (chunk_id, ordinal)
) WITHOUT ROWID;

-- Files indexed before this version have grouped chunks (and classes that fit whole) without
-- parts: the next index run reads them again (an unknown hash never matches), re-chunks them
-- and embeds only the parts (the chunks' own vectors are found again by their text). A chunk
-- listing three or more definitions may be a container with two members.
UPDATE code_files SET mtime_ns = NULL, content_hash = 'before-chunk-parts'
WHERE id IN (SELECT DISTINCT file_id FROM code_chunks
             WHERE kind = 'block' OR json_array_length(symbols) >= 3);
