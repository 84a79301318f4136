//! Two processes after one job's lease at once (`workspace/lease.rs`): two
//! `paddock publish JOB`, a publish against a running job, a second
//! `Lease::take`. A lease is never taken from its holder: exactly one
//! holds it, the other is told it is busy (or that it is there), never an
//! unexplained error and never a second holder of a replaced file.

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};

use paddock::workspace::Lease;

/// What one attempt got: the lease, busy, or an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Got {
    Held,
    Busy,
    Error,
}

/// Two `take_to_publish` of one job racing, `rounds` times, each round
/// starting from what `before` leaves: how many rounds ended each way (the
/// two outcomes sorted, then what a third publish after the race got).
fn race(rounds: usize, before: impl Fn(&std::path::Path)) -> BTreeMap<(Vec<Got>, Got), usize> {
    let mut out = BTreeMap::new();
    for _ in 0..rounds {
        let jobs = tempfile::tempdir().unwrap();
        before(jobs.path());
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (barrier, dir) = (barrier.clone(), jobs.path().to_path_buf());
                std::thread::spawn(move || {
                    barrier.wait();
                    Lease::take_to_publish(&dir, "job-1")
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let mut got: Vec<Got> = results
            .iter()
            .map(|r| match r {
                Ok(Some(_)) => Got::Held,
                Ok(None) => Got::Busy,
                Err(_) => Got::Error,
            })
            .collect();
        got.sort();
        // While the winner still holds it, a third publish is busy.
        let third = match Lease::take_to_publish(jobs.path(), "job-1") {
            Ok(Some(_)) => Got::Held,
            Ok(None) => Got::Busy,
            Err(_) => Got::Error,
        };
        drop(results);
        *out.entry((got, third)).or_default() += 1;
    }
    out
}

/// No lease file yet (a job whose lease was released): one publish
/// places it, the other is busy. Before, some rounds in 200 had both
/// holding one (the second renamed its file over the first's, which went
/// on publishing on a file no longer there) and some the second failing
/// with "Resource temporarily unavailable" (both locking one `.lock.new`).
#[test]
fn two_publishes_without_a_lease_file_one_holds_it_the_other_is_busy() {
    let got = race(200, |_| {});
    let want = BTreeMap::from([((vec![Got::Held, Got::Busy], Got::Busy), 200)]);
    assert_eq!(got, want);
}

/// A lease file a killed publish left (nobody's lock): one takes it over,
/// the other is busy.
#[test]
fn two_publishes_over_an_abandoned_lease_one_holds_it_the_other_is_busy() {
    let got = race(200, |jobs| {
        std::fs::create_dir_all(jobs.join(".leases")).unwrap();
        std::fs::write(jobs.join(".leases/job-1.lock"), "kept\n").unwrap();
    });
    let want = BTreeMap::from([((vec![Got::Held, Got::Busy], Got::Busy), 200)]);
    assert_eq!(got, want);
}

/// A lease held by a running job is not taken by a second `Lease::take`
/// (it used to rename a new file over it, silently), nor by a publish;
/// released and gone, it can be taken again.
#[test]
fn a_held_lease_is_never_replaced() {
    let jobs = tempfile::tempdir().unwrap();
    let running = Lease::take(jobs.path(), "job-1").unwrap();
    let second = Lease::take(jobs.path(), "job-1")
        .map(|_| ())
        .map_err(|e| e.kind());
    let publish = Lease::take_to_publish(jobs.path(), "job-1")
        .unwrap()
        .is_some();
    let leftovers: Vec<String> = std::fs::read_dir(jobs.path().join(".leases"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    running.release().unwrap();
    drop(running);
    let again = Lease::take(jobs.path(), "job-1").is_ok();
    assert_eq!(
        (second, publish, leftovers, again),
        (
            Err(std::io::ErrorKind::AlreadyExists),
            false,
            vec!["job-1.lock".to_string()],
            true
        )
    );
}
