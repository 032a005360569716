-- engram main schema v11: the knowledge graph's authored part, by key, so that it syncs.
--
-- Nodes and edges written through the graph API (sources agent, user, llm) cannot be
-- recomputed from the code, unlike the indexer's. The graph itself lives in the code home
-- with local integer ids; these tables hold the same rows named by node keys, written in the
-- same transaction as the graph (src/graph/knowledge.rs), and are what sync moves. A device
-- replays the rows it pulls into its own graph. Deleting a node or an edge deletes its row
-- here (sync carries deletions).
CREATE TABLE knowledge_nodes (
  project_id  TEXT    NOT NULL,
  key         TEXT    NOT NULL,
  layer       INTEGER NOT NULL,
  kind        TEXT    NOT NULL,
  label       TEXT    NOT NULL,
  file_path   TEXT,
  start_line  INTEGER,
  end_line    INTEGER,
  source      TEXT    NOT NULL,
  confidence  REAL    NOT NULL,
  metadata    TEXT    NOT NULL,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL,
  PRIMARY KEY (project_id, key)
) WITHOUT ROWID;

CREATE TABLE knowledge_edges (
  project_id  TEXT    NOT NULL,
  from_key    TEXT    NOT NULL,
  to_key      TEXT    NOT NULL,
  kind        TEXT    NOT NULL,
  layer       INTEGER NOT NULL,
  weight      REAL    NOT NULL,
  source      TEXT    NOT NULL,
  confidence  REAL    NOT NULL,
  metadata    TEXT    NOT NULL,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL,
  PRIMARY KEY (project_id, from_key, to_key, kind)
) WITHOUT ROWID;
-- Deleting a node deletes the edges that touch it, from either end.
CREATE INDEX knowledge_edges_to ON knowledge_edges(project_id, to_key);
