-- What changed for the in-process graph indexes (issue 38), replayed from the last seq they
-- saw, so graph writes from any path, thread or process reach them. A row names one node of a
-- project whose row, `contains` or layer-1 `imports` edges, or closure rows as a descendant may
-- have changed (readers re-read all of that for the node), or, with `node_id` NULL, the whole
-- project (a closure rebuild: readers reload).
--
-- Written by the graph code in each write's transaction (`write.rs`: `HopLog` collects the
-- nodes a write touched and the closure's touched descendants, one row each), never by
-- trigger: a trigger on `graph_nodes` or `graph_edges` gives every insert a statement journal,
-- which made the graph sync of a cold index of CPython 4x slower (1.5 -> 7.3 s).
-- Trimmed from the bottom only (the newest row always stays), so seqs only grow and a reader
-- can tell when it fell behind the trim (it then reloads).
CREATE TABLE graph_log (
  seq         INTEGER PRIMARY KEY,
  project_id  TEXT    NOT NULL,
  node_id     INTEGER
);
