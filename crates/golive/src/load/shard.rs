//! Load from several clients: `golive load --shard I/N` runs its share of one plan and
//! writes a shard document (the summary plus its raw HDR histograms, V2 + deflate,
//! base64 in the JSON so one file carries everything); `golive load merge` adds the
//! histograms of all N shards and reports percentiles of the merged distribution, never
//! an average of percentiles.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{merge_stats, LoadOptions, LoadPlan, LoadResult, LoadSummary};
use crate::client::{Api, LatencyStats};

/// The `format` of a shard document.
pub const SHARD_FORMAT: &str = "golive-load-shard/1";

/// Shard `index` of `count` (0-based, as Kubernetes' `JOB_COMPLETION_INDEX`): it sends
/// the request indices `i` with `i % count == index`, so the shards together send
/// exactly the indices of one unsharded run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// This shard's number, 0-based.
    pub index: u32,
    /// How many shards the plan is split into.
    pub count: u32,
}

impl Shard {
    /// The whole plan (no sharding).
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// How many of `total` items (requests, streams) fall to this shard.
    pub fn share_of(&self, total: u64) -> u64 {
        let (n, i) = (u64::from(self.count.max(1)), u64::from(self.index));
        total / n + u64::from(i < total % n)
    }

    /// The plan's request index of this shard's `local`-th request.
    pub fn global_index(&self, local: u64) -> u64 {
        u64::from(self.index) + local * u64::from(self.count.max(1))
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Most shards one load is split into (and merged from).
pub const MAX_SHARDS: u32 = 10_000;

impl FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let usage = || {
            format!("expected INDEX/COUNT with 0 <= INDEX < COUNT <= 10000 (0-based, e.g. 0/4), got {s:?}")
        };
        let (i, n) = s.split_once('/').ok_or_else(usage)?;
        let index: u32 = i.trim().parse().map_err(|_| usage())?;
        let count: u32 = n.trim().parse().map_err(|_| usage())?;
        if count == 0 || index >= count || count > MAX_SHARDS {
            return Err(usage());
        }
        Ok(Shard { index, count })
    }
}

/// The shard of `args` and the whole plan's concurrency (streams, or the open loop's
/// in-flight cap), which the shards split.
pub(super) fn shard_and_concurrency(args: &LoadOptions) -> anyhow::Result<(Shard, u32)> {
    let shard = args.shard.unwrap_or(Shard::WHOLE);
    let total = args
        .concurrency
        .unwrap_or(if args.open_loop() { 1024 } else { 1 });
    anyhow::ensure!(
        args.open_loop() || total >= shard.count,
        "--shard {shard}: the closed loop's --concurrency ({total}) is split across the \
         shards and must be at least {} so every shard has a stream",
        shard.count
    );
    Ok((shard, total))
}

/// The whole plan a shard belongs to: every shard of one run must carry the same one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardPlan {
    /// The server's base URL (several: space-separated), as in the summary.
    pub url: String,
    /// The model asked for.
    pub model: String,
    /// Endpoint: chat or completions.
    pub api: Api,
    /// Total streams (closed loop) or in-flight cap (open loop) of all shards.
    pub concurrency: Option<u32>,
    /// Total requests per second of all shards.
    pub rate: Option<f64>,
    /// Total requests of all shards.
    pub requests: Option<u64>,
    /// Run length of each shard, in seconds (`--duration`).
    pub duration_s: Option<f64>,
    /// Closed loop: pause of each stream between its requests, in seconds (`--think-time`).
    pub think_time_s: Option<f64>,
    /// Prompt length in tokens (`--prompt-tokens`).
    pub prompt_tokens: u32,
    /// Output limit of each request (`--max-tokens`).
    pub max_tokens: u32,
    /// Tokens of the prompt shared by every request (`--shared-prefix-tokens`).
    pub shared_prefix_tokens: u32,
    /// Answers run to the output limit (`--ignore-eos`).
    pub ignore_eos: bool,
}

impl ShardPlan {
    /// The plan of `args` against `url` and `model`.
    pub fn new(args: &LoadOptions, url: &str, model: &str) -> Self {
        ShardPlan {
            url: url.to_string(),
            model: model.to_string(),
            api: args.api,
            concurrency: args.concurrency,
            rate: args.rate,
            requests: args.planned_requests(),
            duration_s: args.duration.map(|d| d.as_secs_f64()),
            think_time_s: args.think_time.map(|d| d.as_secs_f64()),
            prompt_tokens: args.prompt_tokens,
            max_tokens: args.max_tokens,
            shared_prefix_tokens: args.shared_prefix_tokens,
            ignore_eos: args.ignore_eos,
        }
    }
}

/// The raw latency distributions of a run (microseconds), serialised.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EncodedHistograms {
    /// How they are encoded.
    pub encoding: String,
    /// Time to first token (µs).
    pub ttft_us: String,
    /// Gaps between output chunks (µs).
    pub itl_us: String,
    /// Time per output token after the first (µs).
    pub tpot_us: String,
    /// Whole request (µs).
    pub e2e_us: String,
}

const ENCODING: &str = "hdrhistogram-v2-deflate+base64";

fn encode(h: &Histogram<u64>) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .map_err(|e| anyhow::anyhow!("cannot serialise a histogram: {e:?}"))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn decode(text: &str, what: &str) -> anyhow::Result<Histogram<u64>> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .with_context(|| format!("histogram {what}: not base64"))?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| anyhow::anyhow!("histogram {what}: not an HDR V2 histogram ({e:?})"))
}

impl EncodedHistograms {
    /// The histograms of `stats`, encoded.
    pub fn new(stats: &LatencyStats) -> anyhow::Result<Self> {
        Ok(EncodedHistograms {
            encoding: ENCODING.into(),
            ttft_us: encode(&stats.ttft)?,
            itl_us: encode(&stats.itl)?,
            tpot_us: encode(&stats.tpot)?,
            e2e_us: encode(&stats.e2e)?,
        })
    }
}

/// What `golive load --shard I/N` writes: its share's summary and raw histograms.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardOutput {
    /// `SHARD_FORMAT`: what `load merge` checks before reading the rest.
    pub format: String,
    /// Which share of the plan it ran.
    pub shard: Shard,
    /// The whole plan, the same in every shard of one run.
    pub plan: ShardPlan,
    /// UTC, RFC 3339, when this shard started sending.
    pub started_at: String,
    /// This shard's own summary.
    pub summary: LoadSummary,
    /// Its raw latency distributions, for an exact merge.
    pub histograms: EncodedHistograms,
}

impl ShardOutput {
    /// The document of a finished shard run.
    pub fn new(
        args: &LoadOptions,
        summary: &LoadSummary,
        result: &LoadResult,
    ) -> anyhow::Result<Self> {
        let started = chrono::Utc::now()
            - chrono::Duration::from_std(result.elapsed).unwrap_or(chrono::Duration::zero());
        Ok(ShardOutput {
            format: SHARD_FORMAT.into(),
            shard: args.shard.unwrap_or(Shard::WHOLE),
            plan: ShardPlan::new(args, &summary.url, &summary.model),
            started_at: started.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            summary: summary.clone(),
            histograms: EncodedHistograms::new(&result.stats)?,
        })
    }

    /// The file name a shard writes into a results directory.
    pub fn file_name(&self) -> String {
        format!(
            "load-shard-{}-of-{}.json",
            self.shard.index, self.shard.count
        )
    }

    /// The shard's statistics back from its histograms and counters.
    fn stats(&self) -> anyhow::Result<LatencyStats> {
        let h = &self.histograms;
        anyhow::ensure!(
            h.encoding == ENCODING,
            "histograms are encoded as {:?}; this golive reads {ENCODING:?}",
            h.encoding
        );
        let s = &self.summary;
        Ok(LatencyStats {
            ttft: decode(&h.ttft_us, "ttft_us")?,
            itl: decode(&h.itl_us, "itl_us")?,
            tpot: decode(&h.tpot_us, "tpot_us")?,
            e2e: decode(&h.e2e_us, "e2e_us")?,
            requests: s.requests,
            errors: s.errors,
            errors_by_kind: s.errors_by_kind.clone(),
            errors_by_class: s.errors_by_class.clone(),
            reconnects: s.reconnects,
            error_examples: s.error_examples.clone(),
            output_tokens: s.output_tokens,
            chunks: s.chunks,
            prompt_tokens: s.prompt_tokens_total,
            cached_tokens: s.cached_tokens_total,
            slo: s.goodput.as_ref().map(|g| g.slo),
            slo_met: s.goodput.as_ref().map_or(0, |g| g.met_requests),
            slo_met_output_tokens: s.goodput.as_ref().map_or(0, |g| g.met_output_tokens),
            ..LatencyStats::default()
        })
    }
}

/// One shard of a merge, as read.
#[derive(Debug, Clone, Serialize)]
pub struct MergedShard {
    /// The shard's number, 0-based.
    pub index: u32,
    /// The shard document it was read from.
    pub file: PathBuf,
    /// UTC, RFC 3339, when the shard started sending.
    pub started_at: String,
    /// Requests the shard sent.
    pub requests: u64,
    /// Requests that failed.
    pub errors: u64,
    /// How long the shard ran, in seconds.
    pub duration_s: f64,
}

/// What `golive load merge` reports: one summary over all shards.
#[derive(Debug, Clone, Serialize)]
pub struct MergedLoad {
    /// The whole run, percentiles from the merged histograms; its duration is the
    /// longest shard's (the shards run side by side), its concurrency the total.
    #[serde(flatten)]
    pub summary: LoadSummary,
    /// Shards merged.
    pub shard_count: u32,
    /// Each shard as read, by index.
    pub shards: Vec<MergedShard>,
}

impl MergedLoad {
    /// What `golive load merge` prints: one line per shard, then the merged summary.
    pub fn to_text(&self) -> String {
        let mut out = format!("merged {} shards:\n", self.shard_count);
        for s in &self.shards {
            out.push_str(&format!(
                "  shard {}/{}: {} requests, {} errors in {:.2} s, started {} ({})\n",
                s.index,
                self.shard_count,
                s.requests,
                s.errors,
                s.duration_s,
                s.started_at,
                s.file.display()
            ));
        }
        out + &self.summary.to_text()
    }
}

/// The shard documents of a merge: each argument is a shard file, or a directory
/// whose `load-shard-*.json` files are read.
pub fn shard_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("cannot read {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| {
                    f.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("load-shard-") && n.ends_with(".json"))
                })
                .collect();
            anyhow::ensure!(
                !found.is_empty(),
                "{}: no load-shard-*.json file (written by `golive load --shard I/N --out DIR`)",
                p.display()
            );
            found.sort();
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

/// Reads one shard document (a file written by `--out`, or a log with the line a shard
/// printed with `--format json`).
pub fn read_shard(path: &Path) -> anyhow::Result<ShardOutput> {
    let text =
        crate::input::read_text(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse_shard(&text, path)
}

#[cfg(feature = "fuzz")]
/// A fuzz entry: a shard document parsed, bounded and decoded, without a panic.
#[doc(hidden)]
pub fn fuzz_shard(data: &[u8]) {
    let Ok(doc) = parse_shard(&String::from_utf8_lossy(data), Path::new("fuzz")) else {
        return;
    };
    if (1..=MAX_SHARDS).contains(&doc.shard.count) {
        let _ = doc.stats();
    }
}

/// [`read_shard`] of a text read from `path`.
fn parse_shard(text: &str, path: &Path) -> anyhow::Result<ShardOutput> {
    // A shard's pod log (`kubectl logs`) has the document as one line among whatever
    // else reached stdout or stderr.
    let value: serde_json::Value = serde_json::from_str(text)
        .ok()
        .or_else(|| {
            text.lines().rev().find_map(|l| {
                let v: serde_json::Value = serde_json::from_str(l.trim()).ok()?;
                (v.get("format")?.as_str()? == SHARD_FORMAT).then_some(v)
            })
        })
        .with_context(|| {
            format!(
                "{}: not JSON, and no line of it is a shard document",
                path.display()
            )
        })?;
    let format = value.get("format").and_then(|f| f.as_str()).unwrap_or("");
    anyhow::ensure!(
        format == SHARD_FORMAT,
        "{}: not a load shard (format {format:?}, expected {SHARD_FORMAT:?}; \
         write shards with `golive load --shard I/N`)",
        path.display()
    );
    serde_json::from_value(value).with_context(|| format!("{}: bad shard document", path.display()))
}

/// Merges the shards of one run. Every shard of 0..N must be there exactly once, all
/// with the same N and the same plan.
pub fn merge(paths: &[PathBuf]) -> anyhow::Result<MergedLoad> {
    let files = shard_files(paths)?;
    anyhow::ensure!(!files.is_empty(), "no shard files given");
    let mut shards: BTreeMap<u32, (PathBuf, ShardOutput)> = BTreeMap::new();
    let mut first: Option<(PathBuf, Shard, ShardPlan)> = None;
    for file in files {
        let doc = read_shard(&file)?;
        anyhow::ensure!(
            (1..=MAX_SHARDS).contains(&doc.shard.count) && doc.shard.index < doc.shard.count,
            "{} claims shard {}: golive merges 1 to {MAX_SHARDS} shards",
            file.display(),
            doc.shard
        );
        match &first {
            None => first = Some((file.clone(), doc.shard, doc.plan.clone())),
            Some((f0, s0, p0)) => {
                anyhow::ensure!(
                    doc.shard.count == s0.count,
                    "shard counts differ: {} is shard {} but {} is shard {} \
                     (the shards of one run share N)",
                    file.display(),
                    doc.shard,
                    f0.display(),
                    s0
                );
                anyhow::ensure!(
                    doc.plan == *p0,
                    "{} was run with another plan than {}: {}",
                    file.display(),
                    f0.display(),
                    plan_difference(p0, &doc.plan)
                );
            }
        }
        if let Some((earlier, _)) = shards.get(&doc.shard.index) {
            anyhow::bail!(
                "shard {} is given twice: {} and {}",
                doc.shard,
                earlier.display(),
                file.display()
            );
        }
        shards.insert(doc.shard.index, (file, doc));
    }
    let (_, shard0, plan) = first.expect("at least one file");
    let missing: Vec<String> = (0..shard0.count)
        .filter(|i| !shards.contains_key(i))
        .map(|i| format!("{i}/{}", shard0.count))
        .collect();
    anyhow::ensure!(
        missing.is_empty(),
        "missing shard{} {} of {} (have {})",
        if missing.len() > 1 { "s" } else { "" },
        missing.join(", "),
        shard0.count,
        shards
            .keys()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );

    let mut stats = LatencyStats::default();
    let mut longest = 0f64;
    let mut concurrency = 0u32;
    let mut merged_shards = Vec::new();
    for (index, (file, doc)) in &shards {
        let s = doc
            .stats()
            .with_context(|| format!("shard {}", file.display()))?;
        merge_stats(&mut stats, &s);
        longest = longest.max(doc.summary.duration_s);
        concurrency += doc.summary.concurrency;
        merged_shards.push(MergedShard {
            index: *index,
            file: file.clone(),
            started_at: doc.started_at.clone(),
            requests: doc.summary.requests,
            errors: doc.summary.errors,
            duration_s: doc.summary.duration_s,
        });
    }
    let mut load_plan = LoadPlan::new(&plan.model);
    load_plan.api = plan.api;
    load_plan.concurrency = concurrency;
    load_plan.rate = plan.rate;
    load_plan.prompt_tokens = plan.prompt_tokens;
    load_plan.max_tokens = plan.max_tokens;
    load_plan.shared_prefix_tokens = plan.shared_prefix_tokens;
    let summary = LoadSummary::from_stats(
        &plan.url,
        &load_plan,
        &stats,
        Duration::from_secs_f64(longest.max(0.0)),
    );
    Ok(MergedLoad {
        summary,
        shard_count: shard0.count,
        shards: merged_shards,
    })
}

/// The fields two plans differ in, as `name: a vs b`.
fn plan_difference(a: &ShardPlan, b: &ShardPlan) -> String {
    let (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) =
        (serde_json::to_value(a), serde_json::to_value(b))
    else {
        return "plans differ".into();
    };
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .map(|(k, v)| {
            format!(
                "{k}: {v} vs {}",
                b.get(k).unwrap_or(&serde_json::Value::Null)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_the_indices_exactly() {
        for n in 1..=5u32 {
            for total in [0u64, 1, 7, 100, 101] {
                let mut seen = Vec::new();
                for i in 0..n {
                    let s = Shard { index: i, count: n };
                    seen.extend((0..s.share_of(total)).map(|l| s.global_index(l)));
                }
                seen.sort_unstable();
                assert_eq!(seen, (0..total).collect::<Vec<_>>(), "n={n} total={total}");
            }
        }
        assert_eq!("2/4".parse::<Shard>(), Ok(Shard { index: 2, count: 4 }));
        for bad in ["4/4", "1/0", "x/2", "3", "$(JOB_COMPLETION_INDEX)/4"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn histograms_round_trip() {
        let mut stats = LatencyStats::default();
        for v in [1u64, 250, 12_345, 3_000_000] {
            stats.e2e.record(v).unwrap();
        }
        let enc = EncodedHistograms::new(&stats).unwrap();
        let back = decode(&enc.e2e_us, "e2e").unwrap();
        assert_eq!(back, stats.e2e);
        assert!(decode("not base64!", "x").is_err());
        assert!(decode("aGVsbG8=", "x").is_err());
    }
}
