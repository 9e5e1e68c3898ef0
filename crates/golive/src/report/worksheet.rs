//! The runbook's sign-able worksheet, filled from evidence: each item is proven by the
//! checks that ran (or the sign-off, or the verdict), failed by one of them, or needs
//! a person, who attaches what the item names.
//!
//! The items are data (`[[worksheet]]` in a profile, default `profiles/worksheet.toml`),
//! so another model's runbook can differ. `report.json` keeps the items as judged at the
//! end of the run; the renderers show them [`current`], with what the sign-offs add
//! (the reviewer, the rollback owner, open items the reviewer accepted).

use serde::{Deserialize, Serialize};

use super::{Check, Report, Signoff, Status};

/// What proves an item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Proof {
    /// The checks its patterns name.
    #[default]
    Checks,
    /// A second person's sign-off (`golive signoff`).
    Signoff,
    /// A sign-off that names the rollback owner (`--rollback-owner`).
    RollbackOwner,
    /// The run ended in one verdict.
    Verdict,
    /// Nothing golive measures: a person attaches the evidence.
    Person,
}

/// One worksheet item as the profile states it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ItemSpec {
    /// Stable snake_case id (`--accept-open` names it).
    pub id: String,
    /// The runbook's sentence.
    pub text: String,
    /// What proves it.
    pub proof: Proof,
    /// Check ids that prove it; a trailing `*` matches every id with that prefix.
    pub checks: Vec<String>,
    /// What a person attaches when no check covers it.
    pub attach: String,
}

/// Where an item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemState {
    /// The evidence it names is there and passed.
    Proven,
    /// A check it rests on failed (or the verdict is not the one it needs).
    Failed,
    /// No evidence from the run: a person attaches it.
    NeedsPerson,
    /// Open (failed or unattended), and a reviewer accepted it with a reason.
    Accepted,
}

impl ItemState {
    /// The state as the worksheet shows it (`proven`, `needs a person`).
    pub fn as_str(self) -> &'static str {
        match self {
            ItemState::Proven => "proven",
            ItemState::Failed => "failed",
            ItemState::NeedsPerson => "needs a person",
            ItemState::Accepted => "accepted open",
        }
    }

    /// Failed or unattended: a sign-off must accept it by name.
    pub fn is_open(self) -> bool {
        matches!(self, ItemState::Failed | ItemState::NeedsPerson)
    }
}

/// One item, judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The item's id, as [`ItemSpec::id`].
    pub id: String,
    /// The runbook's sentence.
    pub text: String,
    /// What proves it.
    pub proof: Proof,
    /// Where it stands after the run and the sign-offs.
    pub state: ItemState,
    /// The checks it rests on (the failed ones, when it failed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
    /// Why, in words: the evidence, or what to attach.
    pub detail: String,
}

/// The built-in worksheet (the runbook's 18 items and its privacy paragraph's 2), parsed by the profile loader.
pub const BUILTIN: &str = include_str!("../../profiles/worksheet.toml");

/// The `[[worksheet]]` list of a TOML document.
#[derive(Deserialize)]
struct File {
    worksheet: Vec<ItemSpec>,
}

/// The built-in worksheet's items.
pub fn builtin() -> Vec<ItemSpec> {
    toml::from_str::<File>(BUILTIN)
        .expect("the built-in worksheet is valid (tested)")
        .worksheet
}

fn matches(pattern: &str, id: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => id.starts_with(prefix),
        None => id == pattern,
    }
}

/// Judges every item against the report's checks and verdict.
pub fn evaluate(items: &[ItemSpec], report: &Report) -> Vec<Entry> {
    items.iter().map(|i| judge(i, report)).collect()
}

fn judge(item: &ItemSpec, report: &Report) -> Entry {
    let (state, checks, detail) = match item.proof {
        Proof::Checks => by_checks(item, &report.checks),
        Proof::Verdict => by_verdict(report),
        Proof::Signoff | Proof::RollbackOwner | Proof::Person => {
            (ItemState::NeedsPerson, Vec::new(), attach(item))
        }
    };
    let mut entry = Entry {
        id: item.id.clone(),
        text: item.text.clone(),
        proof: item.proof,
        state,
        checks,
        detail,
    };
    with_signoffs(&mut entry, &report.signoffs);
    entry
}

fn attach(item: &ItemSpec) -> String {
    format!("attach: {}", item.attach)
}

fn by_checks(item: &ItemSpec, checks: &[Check]) -> (ItemState, Vec<String>, String) {
    let matched: Vec<&Check> = checks
        .iter()
        .filter(|c| item.checks.iter().any(|p| matches(p, &c.id)))
        .collect();
    let ids = |status: &[Status]| -> Vec<String> {
        matched
            .iter()
            .filter(|c| status.contains(&c.status))
            .map(|c| c.id.clone())
            .collect()
    };
    let failed = ids(&[Status::Fail]);
    if !failed.is_empty() {
        let detail = format!("{} check(s) fail", failed.len());
        return (ItemState::Failed, failed, detail);
    }
    let passed = ids(&[Status::Pass, Status::Warn]);
    if !passed.is_empty() {
        let warned = ids(&[Status::Warn]).len();
        let mut detail = format!("{} check(s) pass", passed.len());
        if warned > 0 {
            detail.push_str(&format!(", {warned} with a warning"));
        }
        return (ItemState::Proven, passed, detail);
    }
    let skipped = ids(&[Status::Skip, Status::Unknown]);
    let why = match matched
        .iter()
        .find(|c| matches!(c.status, Status::Skip | Status::Unknown))
    {
        None => "no check of the run covers it".to_string(),
        Some(first) => format!(
            "its checks could not judge it ({}: {})",
            skipped.join(", "),
            first.measurement
        ),
    };
    (
        ItemState::NeedsPerson,
        skipped,
        format!("{why}; {}", attach(item)),
    )
}

fn by_verdict(report: &Report) -> (ItemState, Vec<String>, String) {
    match (report.complete, report.verdict) {
        (true, Some(v)) => (
            ItemState::Proven,
            Vec::new(),
            format!("{}: {}", v.as_str(), report.verdict_reason),
        ),
        _ => (
            ItemState::Failed,
            Vec::new(),
            "the run did not complete: no verdict".to_string(),
        ),
    }
}

/// What the sign-offs add to an entry: the reviewer (a `signoff` item), the rollback
/// owner and rate limit (a `rollback_owner` item), or an accepted open item.
fn with_signoffs(entry: &mut Entry, signoffs: &[Signoff]) {
    match entry.proof {
        Proof::Signoff => {
            if let Some(s) = signoffs.last() {
                entry.state = ItemState::Proven;
                entry.detail = format!("reviewed by {} ({})", s.reviewer, s.decision.as_str());
            }
        }
        Proof::RollbackOwner => {
            if let Some((s, owner)) = signoffs
                .iter()
                .rev()
                .find_map(|s| s.rollback_owner.as_ref().map(|o| (s, o)))
            {
                entry.state = ItemState::Proven;
                entry.detail = format!("rollback owner {owner}, named by {}", s.reviewer);
            }
        }
        _ => {}
    }
    if entry.state.is_open() {
        if let Some((s, reason)) = signoffs
            .iter()
            .rev()
            .find_map(|s| s.accepted_open.get(&entry.id).map(|r| (s, r)))
        {
            entry.state = ItemState::Accepted;
            entry.detail = format!("{}; accepted by {}: {reason}", entry.detail, s.reviewer);
        }
    }
}

/// The run's items with what `signoffs` add.
fn judged_with(report: &Report, signoffs: &[Signoff]) -> Vec<Entry> {
    report
        .worksheet
        .iter()
        .cloned()
        .map(|mut e| {
            with_signoffs(&mut e, signoffs);
            e
        })
        .collect()
}

/// The report's worksheet as it stands now: the run's items with what every sign-off
/// added.
pub fn current(report: &Report) -> Vec<Entry> {
    judged_with(report, &report.signoffs)
}

/// The items a new sign-off `s` would leave open (failed or unattended, not accepted).
pub fn open_after(report: &Report, s: &Signoff) -> Vec<Entry> {
    let mut signoffs = report.signoffs.clone();
    signoffs.push(s.clone());
    judged_with(report, &signoffs)
        .into_iter()
        .filter(|e| e.state.is_open())
        .collect()
}

/// Counts by state, for a one-line summary: proven, failed, needs a person, accepted.
pub fn tally(entries: &[Entry]) -> [usize; 4] {
    let mut t = [0; 4];
    for e in entries {
        t[match e.state {
            ItemState::Proven => 0,
            ItemState::Failed => 1,
            ItemState::NeedsPerson => 2,
            ItemState::Accepted => 3,
        }] += 1;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Stage, Verdict};

    fn check(id: &str, status: Status) -> Check {
        Check::new(id, Stage::Agent, status, "t")
    }

    fn signoff(reviewer: &str) -> Signoff {
        Signoff {
            reviewer: reviewer.into(),
            decision: Verdict::Release,
            note: String::new(),
            at: chrono::Utc::now(),
            covered: Default::default(),
            previous: None,
            signature: None,
            rollback_owner: None,
            accepted_open: Default::default(),
        }
    }

    #[test]
    fn the_builtin_worksheet_has_the_runbooks_18_items_and_2_privacy_items() {
        let items = builtin();
        assert_eq!(items.len(), 20);
        let mut ids: Vec<&str> = items.iter().map(|i| i.id.as_str()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 20);
        for i in &items {
            assert!(!i.text.is_empty() && !i.attach.is_empty(), "{}", i.id);
            assert_eq!(i.proof == Proof::Checks, !i.checks.is_empty(), "{}", i.id);
        }
    }

    #[test]
    fn an_item_is_failed_by_any_check_proven_by_a_pass_and_open_without_one() {
        let item = ItemSpec {
            id: "tools".into(),
            checks: vec!["agent_tool*".into(), "basic_chat".into()],
            attach: "the schema test".into(),
            ..Default::default()
        };
        let mut r = Report::new(vec![]);
        r.checks = vec![check("agent_tool_required_arg", Status::Pass)];
        let e = judge(&item, &r);
        assert_eq!((e.state, e.checks.len()), (ItemState::Proven, 1));
        r.checks
            .push(check("agent_tool_choice_named", Status::Fail));
        r.checks.push(check("agent_text", Status::Fail));
        let e = judge(&item, &r);
        assert_eq!(e.state, ItemState::Failed);
        assert_eq!(e.checks, vec!["agent_tool_choice_named".to_string()]);
        r.checks = vec![
            check("agent_tool", Status::Skip),
            check("other", Status::Pass),
        ];
        let e = judge(&item, &r);
        assert_eq!(e.state, ItemState::NeedsPerson);
        assert!(
            e.detail.contains("could not judge it (agent_tool: "),
            "{}",
            e.detail
        );
        assert!(e.detail.contains("attach: the schema test"), "{}", e.detail);
        r.checks.clear();
        assert!(judge(&item, &r)
            .detail
            .contains("no check of the run covers it"));
    }

    #[test]
    fn signoffs_prove_the_review_and_owner_and_accept_open_items_by_name() {
        let items = builtin();
        let mut r = Report::new(vec![]);
        r.complete = true;
        r.decide();
        r.worksheet = evaluate(&items, &r);
        let state =
            |r: &Report, id: &str| current(r).into_iter().find(|e| e.id == id).unwrap().state;
        assert_eq!(state(&r, "second_person"), ItemState::NeedsPerson);
        assert_eq!(state(&r, "clear_verdict"), ItemState::Proven);
        let mut s = signoff("bob");
        let open: Vec<String> = open_after(&r, &s).into_iter().map(|e| e.id).collect();
        assert!(!open.contains(&"second_person".to_string()));
        assert!(open.contains(&"rollback_named".to_string()));
        assert!(open.contains(&"recipe_checked".to_string()));
        s.rollback_owner = Some("oncall-llm".into());
        s.accepted_open
            .insert("recipe_checked".into(), "recipe of 2026-11-30 read".into());
        let open: Vec<String> = open_after(&r, &s).into_iter().map(|e| e.id).collect();
        assert!(!open.contains(&"rollback_named".to_string()));
        assert!(!open.contains(&"recipe_checked".to_string()));
        r.signoffs.push(s);
        assert_eq!(state(&r, "rollback_named"), ItemState::Proven);
        assert_eq!(state(&r, "recipe_checked"), ItemState::Accepted);
        assert_eq!(state(&r, "second_person"), ItemState::Proven);
    }
}
