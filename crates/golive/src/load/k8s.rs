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
    pub namespace: Option<String>,
    /// An image whose PATH has `golive`.
    pub image: String,
    /// Number of shards = completions = parallelism.
    pub shards: u32,
    /// The `golive load` arguments every shard gets (the whole plan: --url,
    /// --requests or --rate, ...); `--shard` and `--format json` are added.
    pub load_args: Vec<String>,
}

/// The Job as a JSON value (the batch/v1 shape).
pub fn job_manifest(opts: &JobOptions) -> Value {
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
    args.extend(opts.load_args.iter().cloned());
    let mut metadata = json!({ "name": opts.name, "labels": labels });
    if let Some(ns) = &opts.namespace {
        metadata["namespace"] = json!(ns);
    }
    json!({
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
                    }],
                },
            },
        },
    })
}

/// The manifest as YAML, after a comment that says how to run it and collect the shards.
pub fn job_yaml(opts: &JobOptions) -> anyhow::Result<String> {
    let yaml = serde_norway::to_string(&job_manifest(opts))?;
    let ns = opts
        .namespace
        .as_ref()
        .map(|n| format!(" -n {n}"))
        .unwrap_or_default();
    let last = opts.shards.saturating_sub(1);
    Ok(format!(
        "# golive load: {n} shards of one plan as a Kubernetes Indexed Job.\n\
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
