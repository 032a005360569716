//! Criterion benches of the MemoryObserver in Rust (no JS boundary; `benches/js/observer.mjs`
//! measures across it): `observe()` per message over a realistic agent session, and
//! `finalize()` of a 500-step session (detection, promotion, one transaction) on a database
//! that already holds the counts of earlier sessions.
//!
//! The synthetic session (`agent_session`): per step a reasoning message (one in 25 a
//! self-correction), one or two tool calls over a 120-file project in 12 modules: Read 45 %
//! (results 2-20 KB), Grep 15 %, Edit 20 %, Bash 15 % (one in ten failing, from six error
//! kinds), Glob 5 %; then a step-complete with input tokens. The same mix as the JS bench.
//!
//! Run: `cargo bench --no-default-features --bench observer`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use engram::observer::{Message, SessionOptions, SessionOutcome, ToolCall, ToolResult};
use engram::{Engram, OpenOptions};

/// splitmix64: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

const ERRORS: &[&str] = &[
    "src/api/client.ts(14,31): error TS2345: Argument of type 'string' is not assignable to parameter of type 'number'.",
    "FAIL src/cache/warm.test.ts > warms\nError: ENOENT: no such file or directory, open '/tmp/x/index.json'",
    "error[E0308]: mismatched types\n --> src/lib.rs:10:5",
    "npm ERR! missing script: lint:fix",
    "Traceback (most recent call last):\n  File \"app.py\", line 3\nKeyError: 'user_id'",
    "Error: SQLITE_BUSY: database is locked",
];

/// One realistic agent session of `steps` steps.
fn agent_session(seed: u64, steps: u32) -> Vec<Message> {
    let mut rng = Rng(seed);
    let file = |rng: &mut Rng| {
        let f = rng.below(120);
        format!("src/m{}/file{f}.ts", f % 12)
    };
    let filler = |len: usize| "const value = compute(input);\n".repeat(len / 30 + 1);
    let mut out = Vec::with_capacity(steps as usize * 6);
    for step in 1..=steps {
        let text = if rng.below(25) == 0 {
            format!(
                "Correction: the handler in module {} validates before it parses, not after.",
                rng.below(12)
            )
        } else {
            "I will look at how the request flows through the service and where the cache is filled, then change the handler.".repeat(3)
        };
        out.push(Message::Reasoning { text, step });
        for _ in 0..1 + rng.below(2) {
            let roll = rng.below(100);
            let (call, result) = match roll {
                0..=44 => {
                    let path = file(&mut rng);
                    let len = 2_000 + rng.below(18_000) as usize;
                    (
                        ToolCall {
                            tool: "Read".into(),
                            path: Some(path),
                            ..Default::default()
                        },
                        ToolResult {
                            tool: "Read".into(),
                            text: filler(len.min(16_384)),
                            full_len: len as u32,
                            ..Default::default()
                        },
                    )
                }
                45..=59 => (
                    ToolCall {
                        tool: "Grep".into(),
                        pattern: Some(format!("handle{}", rng.below(40))),
                        ..Default::default()
                    },
                    ToolResult {
                        tool: "Grep".into(),
                        text: format!(
                            "{}:12:  handle()\n{}:40:  handle()\n",
                            file(&mut rng),
                            file(&mut rng)
                        ),
                        full_len: 80,
                        ..Default::default()
                    },
                ),
                60..=79 => (
                    ToolCall {
                        tool: "Edit".into(),
                        path: Some(file(&mut rng)),
                        old_text_hash: Some(rng.below(1000)),
                        new_text_hash: Some(rng.below(1000)),
                        ..Default::default()
                    },
                    ToolResult {
                        tool: "Edit".into(),
                        text: "The file has been updated.".into(),
                        full_len: 26,
                        ..Default::default()
                    },
                ),
                80..=94 => {
                    let failing = rng.below(10) == 0;
                    let command = [
                        "npm run build",
                        "npm test",
                        "npx tsc --noEmit",
                        "npm run lint",
                    ][rng.below(4) as usize];
                    let text = if failing {
                        ERRORS[rng.below(ERRORS.len() as u64) as usize].to_owned()
                    } else {
                        "ok\n".repeat(100)
                    };
                    let full_len = text.len() as u32;
                    (
                        ToolCall {
                            tool: "Bash".into(),
                            command: Some(command.into()),
                            ..Default::default()
                        },
                        ToolResult {
                            tool: "Bash".into(),
                            is_error: failing,
                            text,
                            full_len,
                            ..Default::default()
                        },
                    )
                }
                _ => (
                    ToolCall {
                        tool: "Glob".into(),
                        pattern: Some("src/**/*.test.ts".into()),
                        ..Default::default()
                    },
                    ToolResult {
                        tool: "Glob".into(),
                        text: (0..20).map(|i| format!("src/m{i}/a.test.ts\n")).collect(),
                        full_len: 400,
                        ..Default::default()
                    },
                ),
            };
            out.push(Message::ToolCall(ToolCall { step, ..call }));
            out.push(Message::ToolResult(ToolResult { step, ..result }));
        }
        out.push(Message::StepComplete {
            step,
            input_tokens: Some(4_000 + step * 40),
        });
    }
    out.push(Message::SessionComplete {
        outcome: SessionOutcome::Success,
        steps_executed: steps,
    });
    out
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = rt
        .block_on(Engram::open(OpenOptions::new(
            dir.path().join("observer.db"),
        )))
        .unwrap();
    let messages = agent_session(7, 500);

    let mut group = c.benchmark_group("observe");
    group.throughput(Throughput::Elements(messages.len() as u64));
    group.bench_function("500_step_session_per_message", |b| {
        let mut n = 0u64;
        b.iter_batched(
            || {
                n += 1;
                let s = db
                    .observe(&SessionOptions::new(format!("observe-{n}")))
                    .unwrap();
                (s, messages.clone())
            },
            |(s, messages)| {
                for m in messages {
                    s.observe(black_box(m)).unwrap();
                }
                s
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();

    // Earlier sessions' counts in the database, as in a project in use.
    for i in 0..20 {
        let s = db
            .observe(&SessionOptions::new(format!("warm-{i}")))
            .unwrap();
        s.observe_all(agent_session(100 + i, 500)).unwrap();
        rt.block_on(db.finalize(&s, None)).unwrap();
    }
    let mut n = 0u64;
    c.bench_function("finalize/500_steps", |b| {
        b.iter_batched(
            || {
                n += 1;
                let s = db
                    .observe(&SessionOptions::new(format!("finalize-{n}")))
                    .unwrap();
                s.observe_all(agent_session(1000 + n, 500)).unwrap();
                s
            },
            |s| rt.block_on(db.finalize(&s, None)).unwrap(),
            BatchSize::PerIteration,
        )
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = bench
}
criterion_main!(benches);
