-- The terms of the chunk index with their document counts, read by recall's typo tolerance
-- (a virtual table over code_chunks_fts: it stores nothing).
CREATE VIRTUAL TABLE code_chunks_vocab USING fts5vocab(code_chunks_fts, 'row');
