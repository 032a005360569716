-- Sync bookkeeping (embedded-replica sync with a libSQL server, src/sync/).
--
-- The same tables serve both ends. In a device's working file `sync_changes` is the outbox:
-- the keys of synced rows changed locally and not yet pushed (pruned once the server has
-- them). In the server's database it is the change log other devices pull from (and so reach
-- through their replicas). Rows get there through capture triggers, which src/sync/tables.rs
-- creates only where sync is on: a file that never syncs pays nothing.
CREATE TABLE sync_changes (
  -- AUTOINCREMENT: a seq is never reused after pruning, so a cursor into the log (the server's
  -- per-device push mark, a device's pull mark) never points at a different change.
  seq    INTEGER PRIMARY KEY AUTOINCREMENT,
  tbl    TEXT    NOT NULL,
  -- The changed row's key columns as a JSON array.
  key    TEXT    NOT NULL,
  -- Counter tables only: the increments of this change as a JSON array (applied additively
  -- on the server, so two devices counting the same key lose nothing).
  delta  TEXT
);
CREATE INDEX sync_changes_key ON sync_changes(tbl, key);

-- A device's sync settings and marks (name -> value): the server URL it is bound to, its
-- device id, the server change log seq it has pulled up to.
CREATE TABLE sync_state (
  name   TEXT PRIMARY KEY,
  value  TEXT NOT NULL
) WITHOUT ROWID;

-- On the server: the last outbox seq applied from each device, updated in the same
-- transaction as the rows, so a push whose acknowledgement was lost is not applied twice.
CREATE TABLE sync_devices (
  device_id   TEXT    PRIMARY KEY,
  pushed_seq  INTEGER NOT NULL,
  pushed_at   INTEGER NOT NULL
) WITHOUT ROWID;
