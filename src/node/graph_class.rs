//! The `Engram` class's knowledge-graph methods: inject, delete, reads and impact.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::args::{optional_object, required, required_object};
use super::class::Engram;
use super::derive::{self, DerivedSummary};
use super::error::promise;
use super::graph_types::{
    CentralityOptions, GraphBatch, GraphNode, GraphStats, Impact, ImpactOptions, InjectSummary,
    Neighbour, NeighbourOptions, NodeScore, ReachOptions, Subgraph, TraverseOptions,
};
use super::json::{promise_json, promise_json_inline_first, JsonText};
use crate::graph::Side;

#[napi]
impl Engram {
    /// Writes graph nodes and edges in one transaction: nodes are matched by `key`, edges by
    /// (from, to, kind), so re-sending a batch changes nothing but `updatedAt`. The closure
    /// table follows in the same transaction. Rejects with `ENGRAM_NOT_FOUND` for an edge
    /// endpoint that is neither in the batch nor stored, `ENGRAM_CYCLE` when an edge of an
    /// acyclic kind would close a cycle, `ENGRAM_CONFLICT` for keys the code index owns;
    /// nothing of a rejected batch is kept.
    ///
    /// ```ts
    /// await memory.injectGraph({
    ///   nodes: [{ key: 'concept:auth', kind: 'concept' }],
    ///   edges: [{ from: 'concept:auth', to: 'src/auth/login.ts', kind: 'implemented_by' }],
    /// })
    /// ```
    #[napi(
        ts_args_type = "batch: GraphBatch",
        ts_return_type = "Promise<InjectSummary>"
    )]
    pub fn inject_graph<'env>(
        &self,
        env: &'env Env,
        batch: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, InjectSummary>> {
        let handle = arg!(env, self.handle());
        let batch: GraphBatch = arg!(env, required_object(env, &batch, "batch"));
        let (nodes, edges) = arg!(env, batch.into_core());
        promise(
            env,
            async move { handle.inject_graph(&nodes, &edges).await },
            InjectSummary::from,
        )
    }

    /// Deletes a node you injected, with its edges. Resolves false if there was none; code
    /// nodes reject with `ENGRAM_CONFLICT` (they change with the code).
    #[napi(ts_args_type = "key: string", ts_return_type = "Promise<boolean>")]
    pub fn delete_node<'env>(
        &self,
        env: &'env Env,
        key: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, bool>> {
        let handle = arg!(env, self.handle());
        let key: String = arg!(env, required(env, &key, "key"));
        promise(env, async move { handle.delete_node(&key).await }, |b| b)
    }

    /// Deletes one edge you injected. Resolves false if there was none.
    #[napi(
        ts_args_type = "from: string, to: string, kind: string",
        ts_return_type = "Promise<boolean>"
    )]
    pub fn delete_edge<'env>(
        &self,
        env: &'env Env,
        from: Unknown<'env>,
        to: Unknown<'env>,
        kind: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, bool>> {
        let handle = arg!(env, self.handle());
        let from: String = arg!(env, required(env, &from, "from"));
        let to: String = arg!(env, required(env, &to, "to"));
        let kind: String = arg!(env, required(env, &kind, "kind"));
        promise(
            env,
            async move { handle.delete_edge(&from, &to, &kind).await },
            |b| b,
        )
    }

    /// One graph node by key, or null.
    #[napi(
        ts_args_type = "key: string",
        ts_return_type = "Promise<GraphNode | null>"
    )]
    pub fn get_node<'env>(
        &self,
        env: &'env Env,
        key: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let key: String = arg!(env, required(env, &key, "key"));
        promise_json(env, async move { handle.node(&key).await }, |n| {
            n.map(GraphNode::from)
        })
    }

    /// Breadth-first search from a node over the edges, with depth, direction, kind and
    /// layer filters.
    #[napi(
        ts_args_type = "start: string, options?: TraverseOptions",
        ts_return_type = "Promise<Subgraph>"
    )]
    pub fn traverse<'env>(
        &self,
        env: &'env Env,
        start: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let start: String = arg!(env, required(env, &start, "start"));
        let options: Option<TraverseOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let options = match options {
            Some(o) => arg!(env, o.into_core()),
            None => crate::graph::TraverseOptions::default(),
        };
        promise_json(
            env,
            async move { handle.traverse(&start, &options).await },
            Subgraph::from,
        )
    }

    /// What depends on a node (transitively, nearest first), from the closure table.
    #[napi(
        ts_args_type = "key: string, options?: ReachOptions",
        ts_return_type = "Promise<Subgraph>"
    )]
    pub fn ancestors<'env>(
        &self,
        env: &'env Env,
        key: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        self.reach(env, key, options, Side::Ancestors)
    }

    /// What a node depends on (transitively, nearest first), from the closure table.
    #[napi(
        ts_args_type = "key: string, options?: ReachOptions",
        ts_return_type = "Promise<Subgraph>"
    )]
    pub fn descendants<'env>(
        &self,
        env: &'env Env,
        key: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        self.reach(env, key, options, Side::Descendants)
    }

    /// The nodes named by `keys` (unknown keys skipped) and every edge among them.
    #[napi(ts_args_type = "keys: string[]", ts_return_type = "Promise<Subgraph>")]
    pub fn subgraph<'env>(
        &self,
        env: &'env Env,
        keys: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let keys: Vec<String> = arg!(env, required(env, &keys, "keys"));
        promise_json(
            env,
            async move { handle.subgraph(&keys).await },
            Subgraph::from,
        )
    }

    /// What a change to `target` affects: every node that depends on it within the closure
    /// depth (for a file: on the file or any of its symbols; for a module: on anything in
    /// it), with depth, path and weight, and the memories attached to any of them. `target` is
    /// a path (`src/auth/login.ts`), `path:Qualified.name` or any node key.
    ///
    /// ```ts
    /// const { affected, memories } = await memory.impact('src/auth/login.ts:Auth.login')
    /// ```
    #[napi(
        ts_args_type = "target: string, options?: ImpactOptions",
        ts_return_type = "Promise<Impact>"
    )]
    pub fn impact<'env>(
        &self,
        env: &'env Env,
        target: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let target: String = arg!(env, required(env, &target, "target"));
        let options: Option<ImpactOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let options = arg!(
            env,
            options
                .map(ImpactOptions::into_core)
                .transpose()
                .map(Option::unwrap_or_default)
        );
        // An answer of the default size from the served index takes ~0.1 ms, less than the two
        // thread hops of the runtime: it runs on this thread first (see promise_inline_first).
        // The tables' answer and a replay of graph writes yield to the runtime before they
        // start (graph/mod.rs, served.rs); larger answers go to the runtime at once.
        let short = options.limit <= crate::graph::DEFAULT_IMPACT_LIMIT
            && options.memory_limit <= crate::graph::DEFAULT_IMPACT_MEMORY_LIMIT;
        let fut = async move { handle.impact(&target, &options).await };
        if short {
            promise_json_inline_first(env, fut, Impact::from)
        } else {
            promise_json(env, fut, Impact::from)
        }
    }

    /// The nodes one edge away from `keys`, heaviest link first: what a retrieval adds
    /// around recently touched files. A file or module stands for what it contains; unknown
    /// keys are skipped.
    ///
    /// ```ts
    /// const near = await memory.neighbours(['src/auth/login.ts'], { direction: 'both', limit: 20 })
    /// ```
    #[napi(
        ts_args_type = "keys: string[], options?: NeighbourOptions",
        ts_return_type = "Promise<Neighbour[]>"
    )]
    pub fn neighbours<'env>(
        &self,
        env: &'env Env,
        keys: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let keys: Vec<String> = arg!(env, required(env, &keys, "keys"));
        let options: Option<NeighbourOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let options = match options {
            Some(o) => arg!(env, o.into_core()),
            None => crate::graph::NeighbourOptions::default(),
        };
        promise_json(
            env,
            async move { handle.neighbours(&keys, &options).await },
            |found| found.into_iter().map(Neighbour::from).collect::<Vec<_>>(),
        )
    }

    /// Centrality of the nodes named by `keys` within the subgraph they induce, best first:
    /// PageRank (default) or weighted degree. Unknown keys are skipped.
    ///
    /// ```ts
    /// const ranked = await memory.centrality(candidateFiles, { method: 'degree' })
    /// ```
    #[napi(
        ts_args_type = "keys: string[], options?: CentralityOptions",
        ts_return_type = "Promise<NodeScore[]>"
    )]
    pub fn centrality<'env>(
        &self,
        env: &'env Env,
        keys: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, Vec<NodeScore>>> {
        let handle = arg!(env, self.handle());
        let keys: Vec<String> = arg!(env, required(env, &keys, "keys"));
        let options: Option<CentralityOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let options = match options {
            Some(o) => arg!(env, o.into_core()),
            None => crate::graph::CentralityOptions::default(),
        };
        promise(
            env,
            async move { handle.centrality(&keys, &options).await },
            |scores| scores.into_iter().map(NodeScore::from).collect(),
        )
    }

    /// Layer-2 relations from your language model: `deriver` receives summaries of modules
    /// (files, entry points, imports both ways, symbols; 25 per call) and returns the
    /// relations it sees as a graph batch, or null to leave those modules alone. Its answer
    /// replaces what it returned for the same modules before; everything is stored as layer
    /// 2 with source `llm`, and it can overwrite neither code rows nor what agents and users
    /// wrote (`ENGRAM_CONFLICT`). An edge belongs to the module it starts from, or (when it
    /// starts at a concept or other node) to the module it ends at; that module must be one
    /// it was asked about (`ENGRAM_INVALID_ARG`), and only edges belonging to the modules
    /// asked about are replaced. A throw, rejection or
    /// malformed answer rejects with `ENGRAM_CALLBACK` (answers already written stay).
    /// `index({ deriveRelations })` runs the same after an index run, for the modules it
    /// changed.
    ///
    /// ```ts
    /// await memory.deriveRelations(async ({ modules }) => ({
    ///   nodes: [{ key: 'concept:billing', kind: 'concept' }],
    ///   edges: modules.filter((m) => m.key.startsWith('src/billing/'))
    ///     .map((m) => ({ from: m.key, to: 'concept:billing', kind: 'part_of' })),
    /// }))
    /// ```
    #[napi(
        ts_args_type = "deriver: (request: RelationRequest) => GraphBatch | null | undefined | Promise<GraphBatch | null | undefined>, options?: DeriveOptions",
        ts_return_type = "Promise<DerivedSummary>"
    )]
    pub fn derive_relations<'env>(
        &self,
        env: &'env Env,
        deriver: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, DerivedSummary>> {
        let handle = arg!(env, self.handle());
        let deriver = arg!(env, derive::deriver(&deriver, "deriver"));
        let options: Option<DeriveOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let (modules, timeout_ms) = options.map_or((None, None), |o| (o.modules, o.timeout_ms));
        let timeout = match timeout_ms {
            None => derive::DEFAULT_TIMEOUT,
            Some(ms) if (1.0..=86_400_000.0).contains(&ms) && ms.fract() == 0.0 => {
                std::time::Duration::from_millis(ms as u64)
            }
            Some(ms) => {
                return super::error::rejected(
                    env,
                    crate::Error::invalid(format!(
                    "options.timeoutMs must be a whole number of ms from 1 to 86400000, got {ms}"
                )),
                )
            }
        };
        promise(
            env,
            async move {
                let cancel = Arc::new(AtomicBool::new(false));
                derive::run(&handle, deriver, modules, timeout, &cancel).await
            },
            DerivedSummary::from,
        )
    }

    /// Node, edge and closure-row counts of this project's graph.
    #[napi(ts_return_type = "Promise<GraphStats>")]
    pub fn graph_stats<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, GraphStats>> {
        let handle = arg!(env, self.handle());
        promise(
            env,
            async move { handle.graph_stats().await },
            GraphStats::from,
        )
    }
}

impl Engram {
    fn reach<'env>(
        &self,
        env: &'env Env,
        key: Unknown<'env>,
        options: Option<Unknown<'env>>,
        side: Side,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let key: String = arg!(env, required(env, &key, "key"));
        let options: Option<ReachOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let (max_depth, limit) = options.map_or((None, 500), |o| {
            (o.max_depth.map(u32::from), o.limit.map_or(500, u32::from))
        });
        promise_json(
            env,
            async move { handle.reach(&key, side, max_depth, limit).await },
            Subgraph::from,
        )
    }
}

/// Options of `deriveRelations()`.
#[napi(object)]
pub struct DeriveOptions {
    /// Module keys to ask about (default: every module).
    pub modules: Option<Vec<String>>,
    /// How long one call of the deriver may take, in ms (default 300000): past it the call
    /// rejects with `ENGRAM_CALLBACK` ("timed out").
    pub timeout_ms: Option<f64>,
}
