//! The kimi-k3 profile against its sources in `../shared/seeds` (the runbook, German
//! 000 and English 001, and the acceptance protocol 004): every fact the profile
//! carries is stated there, and the recipe reader's prose patterns read the same value
//! from the runbook's sentences wherever the runbook quotes the recipe in the recipe's
//! words. The seeds are read in place.

use crate::common;

use golive::profile::Profile;
use golive::profile::{ProseFact, RECIPE_PROSE};
use regex::Regex;

struct Seeds {
    de: String,
    en: String,
    acceptance: String,
}

fn seeds() -> Option<Seeds> {
    let dir = common::shared_dir()?.join("seeds");
    let read = |prefix: &str| {
        let name = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with(prefix))
            .unwrap_or_else(|| panic!("no seed {prefix}_* in {}", dir.display()));
        std::fs::read_to_string(dir.join(name)).unwrap()
    };
    Some(Seeds {
        de: read("000"),
        en: read("001"),
        acceptance: read("004"),
    })
}

/// The first capture of the prose pattern for `fact` in `text`.
fn prose(fact: ProseFact, text: &str) -> Option<String> {
    let row = RECIPE_PROSE.iter().find(|p| p.fact == fact).unwrap();
    let re = Regex::new(row.regex).unwrap();
    let c = re.captures(text)?;
    Some(
        c.get(1)
            .map_or(c[0].to_string(), |m| m.as_str().to_string()),
    )
}

#[test]
fn prose_patterns_read_the_runbooks_quotes_of_the_recipe() {
    let Some(s) = seeds() else { return };
    let k = Profile::load("kimi-k3").unwrap();
    // "The official Kimi K3 recipe specifies the vllm/vllm-openai:kimi-k3 Docker image."
    assert_eq!(
        prose(ProseFact::Image, &s.en).as_deref(),
        Some(k.image.official[0].as_str())
    );
    // "Verwenden Sie einen offiziell unterstützten R580+-Treiber ..."
    let branch = prose(ProseFact::DriverBranch, &s.de).unwrap();
    assert_eq!(Some(format!("R{branch}")), k.driver.branch);
    assert!(k.driver.min.as_deref().unwrap().starts_with(&branch));
    // "Für RDMA soll UCX_TLS="rc,cuda_copy" gesetzt werden ..."
    assert_eq!(
        prose(ProseFact::UcxTls, &s.de).as_deref(),
        Some(k.transport.rdma_env["UCX_TLS"].as_str())
    );
    // "The documented fallback is NCCL_DMABUF_ENABLE=0, which uses nvidia_peermem"
    assert!(prose(ProseFact::DmabufFallback, &s.en).is_some());
    assert_eq!(
        k.transport.dmabuf_fallback_env.as_deref(),
        Some("NCCL_DMABUF_ENABLE")
    );
    // The runbook paraphrases these (no pattern reads them there): the profile has them.
    assert!(prose(ProseFact::All2allBackend, &s.en).is_none());
    assert!(prose(ProseFact::Hardware, &s.en).is_none());
}

#[test]
fn every_kimi_k3_fact_is_stated_in_the_seeds() {
    let Some(s) = seeds() else { return };
    let all = format!("{}\n{}\n{}", s.de, s.en, s.acceptance);
    let k = Profile::load("kimi-k3").unwrap();
    let stated = |fact: &str, what: &str| {
        assert!(all.contains(fact), "{what} {fact:?} is not in the seeds");
    };
    stated(&k.image.official[0], "image");
    stated(
        &format!("CUDA {}", k.image.cuda_major.unwrap()),
        "CUDA build",
    );
    stated(
        k.driver.min.as_deref().unwrap(),
        "minimum driver (CUDA 13.0 GA)",
    );
    stated(k.driver.branch.as_deref().unwrap(), "driver branch");
    stated(k.vllm.min_version.as_deref().unwrap(), "minimum vLLM");
    stated(&k.gpus.classes[0], "GPU class");
    assert_eq!(k.gpus.min_count, Some(8));
    assert!(all.contains("minimum of 8 NVIDIA GB300") && all.contains("acht GB300"));
    for f in &k.flags.required {
        stated(f, "required flag");
    }
    stated(&k.transport.rdma_all2all, "RDMA all-to-all backend");
    stated(&k.transport.nvlink_all2all, "NVLink all-to-all backend");
    for (name, value) in &k.transport.rdma_env {
        stated(&format!("{name}=\"{value}\""), "RDMA environment");
    }
    assert!(k.transport.megamoe_forbidden_with_rdma);
    assert!(
        s.de.contains("MegaMoE") && s.de.contains("nicht mit Cross-Node-RDMA kompatibel"),
        "MegaMoE over cross-node RDMA"
    );
    stated(
        &format!("{}=0", k.transport.dmabuf_fallback_env.as_deref().unwrap()),
        "errno-524 fallback",
    );
    stated(
        k.cache.retention_env.as_deref().unwrap(),
        "retention variable",
    );
    assert_eq!(k.cache.max_context, Some(1_048_576));
    assert!(s.de.contains("1.000.000 Tokens"), "the context window");
    // The GPU classes with multi-node NVLink (generic facts) are the runbook's MNNVL ones.
    assert!(s.en.contains("MNNVL variables for GB200 and GB300"));
    assert_eq!(
        k.fabrics.nvlink.multi_node_gpus,
        ["GB200".to_string(), "GB300".to_string()]
    );
}
