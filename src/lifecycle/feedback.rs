//! Feedback and the review queue: what people say about memories moves their confidence and
//! their review state, and every word of it is kept in the event log.
//!
//! - `helpful` raises the stored confidence by [`HELPFUL_BOOST`] (to 1 at most);
//! - `wrong` lowers it by [`WRONG_PENALTY`], flags the memory for review and restarts its count
//!   of uncorrected uses (seed 004's feedback loop);
//! - a correction stores the corrected text as a new, user-verified memory that supersedes the
//!   old one, and forgets the old one.
//!
//! Review: `confirm` (optionally with an edit) clears `needsReview` and marks the memory
//! user-verified; `reject` forgets it. Use by recall is the other trust signal (seed 003
//! section 18): see `memory::touch`.

use libsql::params;

use super::events::{self, EventKind, EventNote, MemoryEvent};
use super::trust::{self, TrustOffer};
use crate::error::{DbContext, Error, Result};
use crate::memory::model::string_enum;
use crate::memory::{
    change_in, load, prepare_batch, prepare_patch, remember_in, Ctx, Memory, MemoryPatch,
    MemoryRelation, MemorySource, RelationType, RememberInput,
};
use crate::store::begin_write;

/// How much `helpful` raises the stored confidence.
pub const HELPFUL_BOOST: f64 = 0.05;
/// How much `wrong` lowers it.
pub const WRONG_PENALTY: f64 = 0.1;
/// The confidence a correction is stored with (a person said it).
pub const CORRECTION_CONFIDENCE: f64 = 0.9;

string_enum!(
    /// What a person or agent says about a memory it was given.
    FeedbackKind, "feedback kind" {
        /// It helped.
        Helpful = "helpful",
        /// It is wrong.
        Wrong = "wrong",
        /// It is wrong, and this is what is right (the `correction` text).
        Correction = "correction",
    }
);

/// One piece of feedback.
#[derive(Debug, Clone)]
pub struct FeedbackInput {
    /// What is said.
    pub kind: FeedbackKind,
    /// The corrected text (required for `correction`, refused otherwise).
    pub correction: Option<String>,
    /// Who says it and in which session.
    pub note: EventNote,
}

/// What feedback did.
#[derive(Debug, Clone)]
pub struct FeedbackOutcome {
    /// The memory the feedback was about, as it is now.
    pub memory: Memory,
    /// For a correction: the new memory that supersedes it.
    pub correction: Option<Memory>,
    /// The event recorded.
    pub event: MemoryEvent,
    /// A pending offer to step the project's trust level down (made once memories are
    /// flagged wrong three times in one session; see `lifecycle::trust`).
    pub trust_offer: Option<TrustOffer>,
}

/// After a `wrong` or a correction in a session: the offer to step down, if one is pending.
async fn regression_offer(
    ctx: &Ctx<'_>,
    tx: &libsql::Connection,
    note: &EventNote,
    now: i64,
) -> Result<Option<TrustOffer>> {
    match note.session_id.as_deref() {
        Some(session) => trust::offer_regression_in(tx, ctx.project_id, session, now).await,
        None => Ok(None),
    }
}

/// Checks the optional parts of an event: ids bounded, the body and the author
/// privacy-filtered.
pub(crate) fn validate_note(
    ctx: &Ctx<'_>,
    note: EventNote,
    body_required: bool,
) -> Result<EventNote> {
    let v = ctx.validator();
    let body = match note.body.as_deref().map(str::trim) {
        Some(b) if !b.is_empty() => Some(v.content(b)?.text),
        _ if body_required => return Err(Error::invalid("a comment (body) is required")),
        _ => None,
    };
    Ok(EventNote {
        session_id: v.opt_id("sessionId", note.session_id.as_deref())?,
        author: v.opt_text("author", note.author.as_deref())?.0,
        body,
    })
}

/// Applies feedback to a memory of the project; see the module doc.
pub(crate) async fn feedback(
    ctx: &Ctx<'_>,
    id: &str,
    input: FeedbackInput,
) -> Result<FeedbackOutcome> {
    match (input.kind, input.correction.as_deref()) {
        (FeedbackKind::Correction, None) => {
            return Err(Error::invalid(
                "a correction needs the corrected text (correction)",
            ))
        }
        (FeedbackKind::Helpful | FeedbackKind::Wrong, Some(_)) => {
            return Err(Error::invalid(
                "correction text is only accepted with kind 'correction'",
            ))
        }
        _ => {}
    }
    if input.kind == FeedbackKind::Correction {
        return correct(ctx, id, input).await;
    }
    let note = validate_note(ctx, input.note, false)?;
    let now = ctx.clock.now_ms();
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let (sql, kind, amount) = match input.kind {
        FeedbackKind::Helpful => (
            "UPDATE memories SET confidence = min(1.0, confidence + ?3),
               helpful_count = helpful_count + 1
             WHERE id = ?1 AND project_id = ?2",
            EventKind::Helpful,
            HELPFUL_BOOST,
        ),
        _ => (
            "UPDATE memories SET confidence = max(0.0, confidence - ?3),
               wrong_count = wrong_count + 1, uncorrected_uses = 0, needs_review = 1
             WHERE id = ?1 AND project_id = ?2",
            EventKind::Wrong,
            WRONG_PENALTY,
        ),
    };
    let changed = tx
        .execute(sql, params![id, ctx.project_id, amount])
        .await
        .ctx("recording feedback")?;
    if changed == 0 {
        return Err(Error::not_found("memory", id));
    }
    let event = events::record(&tx, ctx.project_id, id, kind, &note, now).await?;
    let memory = load(ctx, &tx, id).await?;
    let trust_offer = if kind == EventKind::Wrong {
        regression_offer(ctx, &tx, &note, now).await?
    } else {
        None
    };
    tx.commit().await.ctx("committing feedback")?;
    Ok(FeedbackOutcome {
        memory,
        correction: None,
        event,
        trust_offer,
    })
}

/// A correction: the corrected text becomes a user-verified memory superseding the old one,
/// which is forgotten; one transaction.
async fn correct(ctx: &Ctx<'_>, id: &str, input: FeedbackInput) -> Result<FeedbackOutcome> {
    let text = input.correction.unwrap_or_default();
    let mut note = input.note;
    note.body = Some(text.clone());
    let note = validate_note(ctx, note, true)?;
    let now = ctx.clock.now_ms();
    let mut conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let old = load(ctx, &tx, id).await?;
    let corrected = RememberInput {
        memory_type: old.memory_type,
        content: text,
        confidence: Some(old.confidence.max(CORRECTION_CONFIDENCE)),
        tags: old.tags.clone(),
        related_files: old.related_files.clone(),
        related_modules: old.related_modules.clone(),
        scope: Some(old.scope),
        share_scope: Some(old.share_scope),
        source: Some(MemorySource::UserTaught),
        session_id: note.session_id.clone(),
        commit_sha: old.commit_sha.clone(),
        work_unit_ref: old.work_unit_ref.clone(),
        methodology: old.methodology.clone(),
        target_node_id: old.target_node_id.clone(),
        impacted_node_ids: old.impacted_node_ids.clone(),
        relations: vec![MemoryRelation {
            target_memory_id: Some(old.id.clone()),
            target_file_path: None,
            relation_type: RelationType::Supersedes,
            confidence: 1.0,
            auto_extracted: false,
        }],
        decay_half_life_days: old.decay_half_life_days,
        needs_review: Some(false),
        user_verified: Some(true),
        citation_text: None,
        pinned: Some(old.pinned),
        metadata: None,
        triggers: old.triggers.clone(),
    };
    let batch = prepare_batch(ctx, vec![corrected])?;
    let new = remember_in(ctx, &mut conn, &tx, batch)
        .await?
        .pop()
        .expect("one input gives one result")
        .memory;
    let by = new.id.clone();
    let (memory, _) = change_in(ctx, &tx, id, "correct", |m| {
        if !m.deprecated {
            m.deprecated = true;
            m.deprecated_at = Some(now);
            m.deprecated_reason = Some(format!("corrected by {by}"));
        }
        m.superseded_by = Some(by);
        m.uncorrected_uses = 0;
    })
    .await?;
    let event = events::record(&tx, ctx.project_id, id, EventKind::Correction, &note, now).await?;
    let trust_offer = regression_offer(ctx, &tx, &note, now).await?;
    tx.commit().await.ctx("committing correction")?;
    Ok(FeedbackOutcome {
        memory,
        correction: Some(new),
        event,
        trust_offer,
    })
}

/// Confirms a memory in review, after applying `patch` if given (an edit): `needsReview` off,
/// user-verified on, one new version.
pub(crate) async fn confirm(
    ctx: &Ctx<'_>,
    id: &str,
    patch: Option<MemoryPatch>,
    note: EventNote,
) -> Result<Memory> {
    let note = validate_note(ctx, note, false)?;
    let edit = patch
        .filter(|p| !p.is_empty())
        .map(|p| prepare_patch(ctx, p))
        .transpose()?;
    let now = ctx.clock.now_ms();
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let (memory, _) = change_in(ctx, &tx, id, "confirm", |m| {
        if let Some(edit) = edit {
            edit(m);
        }
        m.needs_review = false;
        m.user_verified = true;
    })
    .await?;
    events::record(&tx, ctx.project_id, id, EventKind::Confirm, &note, now).await?;
    tx.commit().await.ctx("committing confirm")?;
    Ok(memory)
}

/// Rejects a memory in review: it is forgotten (the reason says so) and the event is kept.
pub(crate) async fn reject(ctx: &Ctx<'_>, id: &str, note: EventNote) -> Result<Memory> {
    let note = validate_note(ctx, note, false)?;
    let now = ctx.clock.now_ms();
    let reason = match &note.body {
        Some(body) => format!("rejected in review: {body}"),
        None => "rejected in review".to_owned(),
    };
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let (memory, _) = change_in(ctx, &tx, id, "reject", |m| {
        if !m.deprecated {
            m.deprecated = true;
            m.deprecated_at = Some(now);
            m.deprecated_reason = Some(reason);
        }
        m.needs_review = false;
    })
    .await?;
    events::record(&tx, ctx.project_id, id, EventKind::Reject, &note, now).await?;
    tx.commit().await.ctx("committing reject")?;
    Ok(memory)
}
