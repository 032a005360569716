-- The terms of the memory index with their document counts, read by recall's typo tolerance
-- (a virtual table over memories_fts: it stores nothing).
CREATE VIRTUAL TABLE memories_vocab USING fts5vocab(memories_fts, 'row');
