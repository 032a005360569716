-- Trigger patterns: text whose presence in a recall's query or recent files surfaces the
-- memory whatever else ranks (the seed's negative memories: "never commit .env files"
-- triggered by `.env`). A JSON array of lower-case strings.
ALTER TABLE memories ADD COLUMN triggers TEXT NOT NULL DEFAULT '[]';

-- Recall reads the project's triggered memories on every call: keep them one index step away.
CREATE INDEX memories_triggered ON memories(project_id) WHERE triggers <> '[]' AND deprecated = 0;
