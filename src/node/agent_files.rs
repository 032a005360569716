//! The `Engram` class's agent-file bridge: importing `CLAUDE.md`, `AGENTS.md` and
//! `.cursorrules` as memories, and exporting the hot tier back as a generated section.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::agent_file_types::{
    AgentFileExport, AgentImportReport, ExportAgentFileOptions, ImportAgentFilesOptions,
};
use super::args::optional_object;
use super::class::Engram;
use super::json::{promise_json, JsonText};

#[napi]
impl Engram {
    /// Imports the project's agent files as memories (the handle needs `projectRoot`). Each
    /// rule (a bullet, a paragraph, a table row, a command with its code block) becomes a
    /// user-taught, user-verified, pinned memory typed from its words and heading (gotcha,
    /// decision, workflow_recipe, pattern, requirement or preference) and tagged
    /// `agent-file:<path>`. Importing again reconciles: unchanged rules stay, an edited rule
    /// supersedes its old memory, a removed rule is forgotten, and edits people made to
    /// engram's generated section update the memories they name. Every file is checked
    /// before any is imported: a path outside the root, a binary, non-UTF-8 or over-1 MiB
    /// file rejects with `ENGRAM_INVALID_ARG` having changed nothing.
    ///
    /// ```ts
    /// const { files } = await memory.importAgentFiles()
    /// for (const f of files) console.log(f.path, f.created.length, 'new rules')
    /// ```
    #[napi(
        ts_args_type = "options?: ImportAgentFilesOptions",
        ts_return_type = "Promise<AgentImportReport>"
    )]
    pub fn import_agent_files<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let options: Option<ImportAgentFilesOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let options = options.map(Into::into).unwrap_or_default();
        promise_json(
            env,
            async move { handle.import_agent_files(&options).await },
            AgentImportReport::from,
        )
    }

    /// Writes engram's hot tier into an agent file (default `CLAUDE.md`) as a generated
    /// section between `<!-- engram:begin … -->` and `<!-- engram:end -->`, replacing the
    /// previous one; everything else in the file is kept byte for byte (CRLF files stay CRLF)
    /// and the write is atomic. The hot tier: active memories that are not superseded, stale,
    /// disputed, personal or waiting for review, above the trust level's injection threshold
    /// (or pinned, or verified), ranked pinned, verified, then confidence × use. With
    /// `write: false` the file is left alone and `text` is what it would hold.
    ///
    /// ```ts
    /// const out = await memory.exportAgentFile({ file: 'AGENTS.md', limit: 20 })
    /// console.log(out.changed ? `wrote ${out.memoryIds.length} memories` : 'up to date')
    /// ```
    #[napi(
        ts_args_type = "options?: ExportAgentFileOptions",
        ts_return_type = "Promise<AgentFileExport>"
    )]
    pub fn export_agent_file<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let options: Option<ExportAgentFileOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let options = match options {
            Some(o) => arg!(env, o.into_core()),
            None => Default::default(),
        };
        promise_json(
            env,
            async move { handle.export_agent_file(&options).await },
            AgentFileExport::from,
        )
    }
}
