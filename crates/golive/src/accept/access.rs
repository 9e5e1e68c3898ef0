//! Access control (the runbook's privacy paragraph): does the endpoint refuse a request
//! without credentials, and one with a wrong key? Judged against what the operator says
//! the deployment is (`--expect-auth`: private). Each route is asked with a request that
//! costs no generation: `GET /v1/models` and a `POST /v1/chat/completions` with an
//! empty body (an open server answers it 400/422, a closed one 401/403).

use serde_json::json;

use crate::report::{Check, CheckId, Impact, Owner, Stage, Status};
use crate::target::Target;

const MODELS: &str = "GET /v1/models";
const CHAT: &str = "POST /v1/chat/completions";

/// A key no deployment issues: a server that accepts it checks no key at all.
const WRONG_KEY: &str = "golive-wrong-key-0000000000000000";

/// What one unauthenticated probe got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// What was sent: `no credentials` or `a wrong key`.
    pub credentials: &'static str,
    /// `GET /v1/models` or `POST /v1/chat/completions`.
    pub route: &'static str,
    /// HTTP status; 0: no answer.
    pub status: u16,
}

impl Probe {
    fn refused(&self) -> bool {
        matches!(self.status, 401 | 403)
    }
    fn answered(&self) -> bool {
        self.status != 0
    }
    /// The inference route carries the agent data; listing the models does not (llama.cpp
    /// keeps `/v1/models` public even with `--api-key`), so only this one must refuse.
    fn carries_data(&self) -> bool {
        self.route == CHAT
    }
}

/// The four probes: no credentials and a wrong key, on both routes.
pub async fn probe(target: &Target) -> anyhow::Result<Vec<Probe>> {
    let mut probes = Vec::new();
    for (credentials, t) in [
        ("no credentials", target.without_credentials()),
        ("a wrong key", target.with_api_key(WRONG_KEY)),
    ] {
        let http = t.http_client()?;
        let models = http.get(t.url("/v1/models")).send().await;
        let chat = http
            .post(t.url("/v1/chat/completions"))
            .json(&json!({}))
            .send()
            .await;
        for (route, r) in [(MODELS, models), (CHAT, chat)] {
            probes.push(Probe {
                credentials,
                route,
                status: r.map(|r| r.status().as_u16()).unwrap_or(0),
            });
        }
    }
    Ok(probes)
}

/// Judges the probes: a private deployment (`expect_auth`) must refuse every one; an
/// open one is recorded as open.
pub fn judge(probes: &[Probe], expect_auth: bool, id: String) -> Check {
    let mut c = Check::new(
        id,
        Stage::Service,
        Status::Pass,
        if expect_auth {
            "the private endpoint refuses requests without a key and with a wrong key"
        } else {
            "whether the endpoint requires a key (pass --expect-auth when it must)"
        },
    );
    c.evidence = probes
        .iter()
        .map(|p| format!("{} with {}: HTTP {}", p.route, p.credentials, p.status))
        .collect::<Vec<_>>()
        .join("\n");
    c.data = json!(probes
        .iter()
        .map(|p| json!({"route": p.route, "credentials": p.credentials, "status": p.status}))
        .collect::<Vec<_>>());
    let open: Vec<&Probe> = probes
        .iter()
        .filter(|p| p.carries_data() && p.answered() && !p.refused())
        .collect();
    let refused = probes.iter().filter(|p| p.refused()).count();
    if probes.iter().all(|p| !p.answered()) {
        c.status = Status::Skip;
        c.measurement = "no answer to the unauthenticated probes".into();
        return c;
    }
    c.measurement = format!(
        "{refused} of {} unauthenticated requests refused (401/403)",
        probes.len()
    );
    if probes
        .iter()
        .any(|p| p.route == MODELS && p.answered() && !p.refused())
    {
        c.measurement.push_str("; the model list is public");
    }
    if open.is_empty() {
        return c;
    }
    let first = open[0];
    let what = format!(
        "{} answered {} with {}",
        first.route, first.status, first.credentials
    );
    if expect_auth {
        c.status = Status::Fail;
        c.impact = Impact::Environment;
        c.owner = Some(Owner::Gateway);
        c.measurement = format!("{}: {what}", c.measurement);
        c.next_step = "the deployment is meant to be private: start vLLM with --api-key \
                       (or VLLM_API_KEY), or require the key at the gateway, then run again"
            .into();
    } else {
        c.impact = Impact::Info;
        c.measurement = format!(
            "{}; open endpoint: {what} (no --expect-auth)",
            c.measurement
        );
    }
    c
}

/// The access check of node `index`.
pub async fn check(target: &Target, expect_auth: bool, index: usize) -> Check {
    let id = super::service::node_id(CheckId::AccessControl, index);
    match probe(target).await {
        Ok(probes) => judge(&probes, expect_auth, id),
        Err(e) => {
            let mut c = Check::new(id, Stage::Service, Status::Skip, "access control");
            c.measurement = format!("the probes could not be sent: {e:#}");
            c
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probes(statuses: [u16; 4]) -> Vec<Probe> {
        let names = [
            ("no credentials", "GET /v1/models"),
            ("no credentials", "POST /v1/chat/completions"),
            ("a wrong key", "GET /v1/models"),
            ("a wrong key", "POST /v1/chat/completions"),
        ];
        names
            .iter()
            .zip(statuses)
            .map(|(&(credentials, route), status)| Probe {
                credentials,
                route,
                status,
            })
            .collect()
    }

    #[test]
    fn a_private_endpoint_must_refuse_every_probe() {
        let closed = judge(&probes([401, 401, 401, 403]), true, "a".into());
        assert_eq!(closed.status, Status::Pass, "{}", closed.measurement);
        let leaky = judge(&probes([401, 401, 401, 400]), true, "a".into());
        assert_eq!(leaky.status, Status::Fail);
        assert_eq!(leaky.impact, Impact::Environment, "rebuild");
        assert_eq!(leaky.owner, Some(Owner::Gateway));
        assert!(
            leaky
                .measurement
                .contains("POST /v1/chat/completions answered 400 with a wrong key"),
            "{}",
            leaky.measurement
        );
        // llama.cpp's public model list alone is no failure, and is said.
        let listed = judge(&probes([200, 401, 200, 401]), true, "a".into());
        assert_eq!(listed.status, Status::Pass);
        assert!(listed.measurement.contains("model list is public"));
        let open = judge(&probes([200, 400, 200, 422]), true, "a".into());
        assert!(
            open.measurement.contains("with no credentials"),
            "{}",
            open.measurement
        );
    }

    #[test]
    fn an_open_endpoint_is_recorded_when_nobody_said_it_is_private() {
        let c = judge(&probes([200, 400, 200, 400]), false, "a".into());
        assert_eq!((c.status, c.impact), (Status::Pass, Impact::Info));
        assert!(c.measurement.starts_with("0 of 4"), "{}", c.measurement);
        assert!(c.measurement.contains("open endpoint"));
        let down = judge(&probes([0, 0, 0, 0]), true, "a".into());
        assert_eq!(down.status, Status::Skip);
    }
}
