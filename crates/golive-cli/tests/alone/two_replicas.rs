//! Issue 27 item 6: the replica arithmetic checked on real servers. One llama-server pinned to
//! core 0 is measured by `accept`'s ramp; its capacity answer predicts what two replicas hold;
//! `golive load` spreads the same requests over two replicas (cores 0 and 1) and measures it.

use crate::common;

use common::ServerGuard;

#[test]
fn two_real_replicas_hold_what_the_capacity_answer_predicts_within_15_percent() {
    let _cores = crate::cores();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "two replicas need two cores"
        );
        eprintln!("skipped: one core");
        return;
    }
    let (pa, pb) = (18301u16, 18302u16);
    let _ga = ServerGuard(pa);
    let _gb = ServerGuard(pb);
    let a = common::start_local_server_on_core(pa, 0);
    let b = common::start_local_server_on_core(pb, 1);

    let dir = tempfile::tempdir().unwrap();
    let accepted = common::accept_one_replica(&a, &b, dir.path());
    let two = common::two_replicas(dir.path(), &accepted, &a, &b);
    two.assert_within_15_percent("llama-server");
}
