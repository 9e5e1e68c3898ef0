//! `golive load --k8s-job N`: a Kubernetes Indexed Job that runs the N shards of one
//! load plan on as many pods. Kubernetes spreads the clients over its nodes; golive
//! schedules nothing itself. Each pod prints its shard document as one JSON line on
//! stdout, so the results are collected with `kubectl logs` (no shared volume or
//! storage class needed) and combined with `golive load merge`.

use serde_json::{json, Value};

/// What the Job runs.
#[derive(Debug, Clone)]
pub struct JobOptions {
    /// Job name (also the pods' label).
    pub name: String,
    /// The namespace to create it in; `None`: kubectl's current one.
    pub namespace: Option<String>,
    /// An image whose PATH has `golive`.
    pub image: String,
    /// Number of shards = completions = parallelism.
    pub shards: u32,
    /// The `golive load` arguments every shard gets (the whole plan: --url,
    /// --requests or --rate, ...); `--shard` and `--format json` are added.
    pub load_args: Vec<String>,
}

/// The Secret the Job takes the API key from, and its key: create it with
/// `kubectl create secret generic golive-api-key --from-literal=api-key=KEY`.
pub const API_KEY_SECRET: &str = "golive-api-key";
/// The key inside [`API_KEY_SECRET`].
pub const API_KEY_SECRET_KEY: &str = "api-key";
/// The variable each shard's `golive load` reads its `--api-key` from.
const API_KEY_ENV: &str = "GOLIVE_API_KEY";

/// The shards' load arguments without the API key (`--api-key K`, `--api_key=K`), and
/// whether one was given: the key goes into the Job through a Secret, never its args.
/// A URL with a user name or password is refused (the Job's args would show it).
fn args_without_key(load_args: &[String]) -> anyhow::Result<(Vec<String>, bool)> {
    let mut args = Vec::with_capacity(load_args.len());
    let mut had_key = false;
    let mut skip_value = false;
    for a in load_args {
        if std::mem::take(&mut skip_value) && !a.starts_with('-') {
            continue;
        }
        let flag = a.split_once('=').map_or(a.as_str(), |(f, _)| f);
        if a.starts_with("--") && crate::redact::is_secret_flag(flag) {
            had_key = true;
            skip_value = !a.contains('=');
            continue;
        }
        let shown = crate::redact::redact_value(a);
        anyhow::ensure!(
            shown == *a,
            "--k8s-job: an argument after `--` holds a password or token ({}), which the \
             Job's args would show to anyone who can read the Job; give the key with \
             --api-key (the Job takes it from the Secret {API_KEY_SECRET}, key \
             {API_KEY_SECRET_KEY}) and a URL without user name and password",
            shown
        );
        args.push(a.clone());
    }
    Ok((args, had_key))
}

/// The container's env: `GOLIVE_API_KEY` from the Secret (required when `--api-key` was
/// given, optional otherwise, so a Secret created later is used).
fn key_env(had_key: bool) -> Value {
    json!([{
        "name": API_KEY_ENV,
        "valueFrom": { "secretKeyRef": {
            "name": API_KEY_SECRET,
            "key": API_KEY_SECRET_KEY,
            "optional": !had_key,
        }},
    }])
}

/// The Job as a JSON value (the batch/v1 shape). The API key is never in it: each pod
/// reads it from the Secret [`API_KEY_SECRET`] (key [`API_KEY_SECRET_KEY`]).
pub fn job_manifest(opts: &JobOptions) -> anyhow::Result<Value> {
    let (load_args, had_key) = args_without_key(&opts.load_args)?;
    let labels =
        json!({ "app.kubernetes.io/name": "golive-load", "app.kubernetes.io/instance": opts.name });
    let mut args: Vec<String> = vec![
        "load".into(),
        "--shard".into(),
        // The Job controller sets JOB_COMPLETION_INDEX (0..N-1) in each container's
        // env; the kubelet expands $(VAR) in args from that env.
        format!("$(JOB_COMPLETION_INDEX)/{}", opts.shards),
        "--format".into(),
        "json".into(),
    ];
    args.extend(load_args);
    let mut metadata = json!({ "name": opts.name, "labels": labels });
    if let Some(ns) = &opts.namespace {
        metadata["namespace"] = json!(ns);
    }
    Ok(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "completionMode": "Indexed",
            "completions": opts.shards,
            "parallelism": opts.shards,
            // A failed shard is not re-run (it would send its share twice); the merge
            // then names the missing shard.
            "backoffLimit": 0,
            "template": {
                "metadata": { "labels": labels },
                "spec": {
                    "restartPolicy": "Never",
                    // One client per node where the cluster has the nodes.
                    "topologySpreadConstraints": [{
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": { "matchLabels": { "app.kubernetes.io/instance": opts.name } },
                    }],
                    "containers": [{
                        "name": "golive-load",
                        "image": opts.image,
                        "command": ["golive"],
                        "args": args,
                        "env": key_env(had_key),
                    }],
                },
            },
        },
    }))
}

/// The manifest as YAML, after a comment that says how to run it and collect the shards.
pub fn job_yaml(opts: &JobOptions) -> anyhow::Result<String> {
    let yaml = serde_norway::to_string(&job_manifest(opts)?)?;
    let ns = opts
        .namespace
        .as_ref()
        .map(|n| format!(" -n {n}"))
        .unwrap_or_default();
    let last = opts.shards.saturating_sub(1);
    Ok(format!(
        "# golive load: {n} shards of one plan as a Kubernetes Indexed Job.\n\
         # The API key comes from the Secret {API_KEY_SECRET} (key {API_KEY_SECRET_KEY}), never the args:\n\
         #   kubectl create secret generic{ns} {API_KEY_SECRET} --from-literal={API_KEY_SECRET_KEY}=KEY\n\
         #   kubectl apply{ns} -f job.yaml\n\
         #   kubectl wait{ns} --for=condition=complete --timeout=24h job/{name}\n\
         #   mkdir -p shards; for i in $(seq 0 {last}); do kubectl logs{ns} --tail=-1 \\\n\
         #     -l batch.kubernetes.io/job-name={name},batch.kubernetes.io/job-completion-index=$i \\\n\
         #     > shards/load-shard-$i-of-{n}.json; done\n\
         #   golive load merge shards\n\
         {yaml}",
        n = opts.shards,
        name = opts.name,
    ))
}
