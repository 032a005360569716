-- The knowledge graph: nodes and edges of all three layers and the depth-capped closure table.
--
-- Node and edge rows use integer keys so that the closure table (the big one) stays small;
-- the public identity of a node is its `key`, unique per project (`file:src/a.ts`,
-- `symbol:src/a.ts#Auth.login`, `module:src/auth`, or any key an agent or user chose), and of
-- an edge its (from, to, kind) triple. Memories refer to nodes by key, so links survive a
-- rebuild of this recomputable home.

CREATE TABLE graph_nodes (
  id            INTEGER PRIMARY KEY,
  project_id    TEXT    NOT NULL,
  key           TEXT    NOT NULL,
  layer         INTEGER NOT NULL CHECK (layer IN (1, 2, 3)),
  kind          TEXT    NOT NULL,             -- file | function | class | module | ... | any agent kind
  label         TEXT    NOT NULL,
  file_path     TEXT,
  start_line    INTEGER,
  end_line      INTEGER,
  source        TEXT    NOT NULL,             -- ast | agent | user | llm
  confidence    REAL    NOT NULL DEFAULT 1.0,
  content_hash  TEXT,                         -- symbols: hash of the definition's text (staleness)
  metadata      TEXT    NOT NULL DEFAULT '{}',
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,
  stale_at      INTEGER,
  UNIQUE (project_id, key)
);
CREATE INDEX graph_nodes_file ON graph_nodes(project_id, file_path) WHERE file_path IS NOT NULL;
CREATE INDEX graph_nodes_kind ON graph_nodes(project_id, layer, kind);

-- Directed edges. Direction is dependency: `a imports b`, `f calls g`, `Sub extends Base`,
-- `file contains symbol`, so what depends on X (its impact) is X's ancestors.
CREATE TABLE graph_edges (
  id          INTEGER PRIMARY KEY,
  project_id  TEXT    NOT NULL,
  from_id     INTEGER NOT NULL REFERENCES graph_nodes(id) ON DELETE CASCADE,
  to_id       INTEGER NOT NULL REFERENCES graph_nodes(id) ON DELETE CASCADE,
  kind        TEXT    NOT NULL,
  layer       INTEGER NOT NULL CHECK (layer IN (1, 2, 3)),
  weight      REAL    NOT NULL DEFAULT 1.0,
  source      TEXT    NOT NULL,
  confidence  REAL    NOT NULL DEFAULT 1.0,
  metadata    TEXT    NOT NULL DEFAULT '{}',
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL,
  stale_at    INTEGER,
  UNIQUE (from_id, to_id, kind)
);
CREATE INDEX graph_edges_to ON graph_edges(to_id, kind);
CREATE INDEX graph_edges_project ON graph_edges(project_id, layer, kind);

-- Every (ancestor, descendant) pair joined by a path of at most the project's closure depth
-- over the transitive edge kinds (all but `contains`), with the shortest such path: its length,
-- the summed weight of its hops and its interior nodes (JSON array of node ids, `[]` for one
-- hop). No foreign keys: the graph code maintains it in the same transaction as the edges.
CREATE TABLE graph_closure (
  ancestor_id    INTEGER NOT NULL,
  descendant_id  INTEGER NOT NULL,
  depth          INTEGER NOT NULL,
  weight         REAL    NOT NULL,
  path           TEXT    NOT NULL,
  PRIMARY KEY (ancestor_id, descendant_id)
) WITHOUT ROWID;
CREATE INDEX graph_closure_descendant ON graph_closure(descendant_id, depth);

-- Per project: the depth cap the closure was built with (a different cap rebuilds it).
CREATE TABLE graph_state (
  project_id     TEXT    PRIMARY KEY,
  closure_depth  INTEGER NOT NULL,
  rebuilt_at     INTEGER NOT NULL
);

-- Symbol staleness compares each definition's text hash across re-indexes; files indexed
-- before this column existed are read again by the next index run.
ALTER TABLE code_symbols ADD COLUMN content_hash TEXT;
UPDATE code_files SET mtime_ns = NULL, content_hash = NULL;
