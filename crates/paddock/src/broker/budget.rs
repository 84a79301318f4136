//! Budget enforcement for one job's broker. A job is bound by up to three
//! ceilings (the job, its ticket across attempts, its project for the UTC
//! day); spend from other jobs comes from the ledger when the job starts,
//! and while it runs (`shared_spend.rs` refreshes it, so jobs running side
//! by side on one ticket or project see each other's settled calls).
//!
//! Each call reserves its worst case (input estimate plus the most output it
//! may produce, at the model's prices) before it is forwarded and settles on
//! its metered cost. A call's input is reckoned at bytes / 4 while it is
//! the job's only call in flight, and at one token a byte (the most a
//! byte-level tokenizer makes) beside others; a call whose input its bytes
//! do not bound (images, files, web search) runs only alone
//! ([`InputReckoning`]). A call is admitted while the settled spend plus the
//! reservations in flight plus its own fit under the tightest ceiling; one
//! that would fit once the calls in flight settle waits for them; one whose
//! worst case does not fit what is left even then is refused, and the job
//! is held. While a response streams, its running cost is updated; a stream
//! whose growth takes the running total (settled + every stream's running
//! cost) past the ceiling is cut. The maximum overshoot is in docs/broker.md.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use paddock_protocol::{JobSpec, TokenUsage};
use time::OffsetDateTime;
use tokio::sync::Notify;

use super::prices::{format_usd, PriceTable};
use super::spend::SpendSource;
use crate::store::{SpendScope, StoreError};

/// Output tokens reserved for a call that does not say how many it may
/// produce (`max_output_tokens` / `max_tokens`) on a model whose price has
/// no `max_output`.
pub const DEFAULT_OUTPUT_RESERVE: u64 = 32_000;

/// How a call's input tokens are reckoned in its worst case. bytes / 4
/// is text's usual rate, not its most: text can make up to one token a
/// byte, so a call's input can pass its estimate. Alone, a call's excess
/// is bounded by the one call (a Messages stream reports its input at its
/// first event and is cut there); calls side by side would each add
/// theirs. So a call beside others of its job in flight is reckoned at
/// one token a byte, which no byte-level tokenizer exceeds, and a call
/// whose input its bytes do not bound at all (an image, a file, audio, a
/// web search: priced by what they hold, not by their size) waits until it
/// is alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputReckoning {
    /// No other call of the job in flight: bytes / 4.
    Alone,
    /// Beside calls in flight: one token a byte.
    Beside,
}

/// A call's worst case in micro-dollars as each [`InputReckoning`] prices
/// it; `beside: None` for a call that runs only alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorstCase {
    pub alone: i64,
    pub beside: Option<i64>,
}

impl WorstCase {
    /// A worst case that is the same alone and beside others.
    pub fn fixed(micros: i64) -> WorstCase {
        WorstCase {
            alone: micros,
            beside: Some(micros),
        }
    }
}

/// What a ceiling applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Job,
    /// The ticket, across all its attempts.
    Ticket,
    /// The ticket's project, for the current UTC day.
    ProjectDay,
}

impl Scope {
    fn describe(self) -> &'static str {
        match self {
            Scope::Job => "job budget",
            Scope::Ticket => "ticket budget (across attempts)",
            Scope::ProjectDay => "project daily budget",
        }
    }
}

/// One ceiling and what other jobs already spent against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ceiling {
    pub scope: Scope,
    pub limit_micros: i64,
    /// Spent before this job started (0 for the job's own ceiling).
    pub prior_micros: i64,
}

impl Ceiling {
    /// How much this job may spend under this ceiling.
    fn room(&self) -> i64 {
        self.limit_micros.saturating_sub(self.prior_micros)
    }

    /// The message of a call refused because its worst case does not fit
    /// what is left.
    pub fn worst_case_message(&self, job_spent: i64, estimate: i64) -> String {
        let spent = self.prior_micros.saturating_add(job_spent);
        format!(
            "paddock broker: {}: this call could cost up to {} (its input and the most output it may produce), more than the {} left ({} of {} spent); the job is held",
            self.scope.describe(),
            format_usd(estimate),
            format_usd(self.limit_micros.saturating_sub(spent).max(0)),
            format_usd(spent),
            format_usd(self.limit_micros)
        )
    }

    /// The message a refused call carries.
    pub fn exhausted_message(&self, job_spent: i64) -> String {
        format!(
            "paddock broker: {} spent ({} of {}); the job is held",
            self.scope.describe(),
            format_usd(self.prior_micros.saturating_add(job_spent)),
            format_usd(self.limit_micros)
        )
    }
}

/// The ceilings of `spec`'s budget, with what earlier jobs of the same
/// ticket and of the same project today (at `now`) already spent.
pub async fn ceilings(
    spec: &JobSpec,
    job_id: &str,
    spend: &dyn SpendSource,
    now: OffsetDateTime,
) -> Result<Vec<Ceiling>, StoreError> {
    let mut out = Vec::new();
    if let Some(limit) = spec.budget.max_micros() {
        out.push(Ceiling {
            scope: Scope::Job,
            limit_micros: limit,
            prior_micros: 0,
        });
    }
    if let Some(limit) = spec.budget.ticket_max_micros() {
        out.push(Ceiling {
            scope: Scope::Ticket,
            limit_micros: limit,
            prior_micros: spend
                .spent_micros(
                    &SpendScope::Ticket {
                        project: spec.ticket.project.clone(),
                        ticket_id: spec.ticket.id.clone(),
                    },
                    job_id,
                )
                .await?,
        });
    }
    if let Some(limit) = spec.budget.project_daily_max_micros() {
        out.push(Ceiling {
            scope: Scope::ProjectDay,
            limit_micros: limit,
            prior_micros: spend
                .spent_micros(
                    &SpendScope::ProjectDay {
                        project: spec.ticket.project.clone(),
                        at: now,
                    },
                    job_id,
                )
                .await?,
        });
    }
    Ok(out)
}

/// The ceiling that binds first, if any is already spent before the job
/// makes a call.
pub fn exhausted_before_start(ceilings: &[Ceiling]) -> Option<Ceiling> {
    tightest(ceilings).filter(|c| c.room() <= 0)
}

fn tightest(ceilings: &[Ceiling]) -> Option<Ceiling> {
    ceilings.iter().copied().min_by_key(Ceiling::room)
}

/// A call's worst case, reserved before it is forwarded: the request's
/// bytes as uncached input tokens, reckoned as `input` says, plus the most
/// output it may produce (its own
/// `max_output_tokens` / `max_tokens`, at most the model's `max_output`;
/// without a cap, the model's `max_output`, else
/// [`DEFAULT_OUTPUT_RESERVE`]) for each of its `choices` (Chat Completions'
/// `n`: each choice is capped on its own and all are billed), at the
/// model's prices (the long-context tier when that input is above its
/// threshold).
pub fn estimate_micros(
    prices: &PriceTable,
    model: &str,
    request_bytes: u64,
    max_output: Option<u64>,
    choices: u64,
    input: InputReckoning,
) -> i64 {
    let tokens = worst_case_tokens(prices, model, request_bytes, max_output, choices, input);
    prices.cost_micros(model, &tokens).unwrap_or(0)
}

/// The tokens of a call's worst case ([`estimate_micros`] prices them):
/// what its row written ahead holds until it settles, and keeps if its end
/// is never seen.
pub fn worst_case_tokens(
    prices: &PriceTable,
    model: &str,
    request_bytes: u64,
    max_output: Option<u64>,
    choices: u64,
    input: InputReckoning,
) -> TokenUsage {
    let model_max = prices.price(model).and_then(|p| p.max_output);
    let output = match (max_output, model_max) {
        (Some(asked), Some(max)) => asked.min(max),
        (Some(asked), None) => asked,
        (None, Some(max)) => max,
        (None, None) => DEFAULT_OUTPUT_RESERVE,
    }
    .saturating_mul(choices.max(1));
    TokenUsage {
        input_tokens: match input {
            InputReckoning::Alone => request_bytes / 4,
            InputReckoning::Beside => request_bytes,
        },
        output_tokens: output,
        ..TokenUsage::default()
    }
}

#[derive(Debug, Default)]
struct State {
    /// The ceilings, with what other jobs spent as last read.
    ceilings: Vec<Ceiling>,
    /// Settled spend of this job.
    spent: i64,
    /// Calls in flight: (reservation, running cost).
    flights: HashMap<u64, (i64, i64)>,
    held: bool,
}

/// Whether a call may go upstream.
#[derive(Debug)]
pub enum Admission {
    Admitted(Reservation),
    /// A ceiling is spent: the message for the engine.
    Refused(String),
}

/// A job's budgets, shared by its calls.
#[derive(Debug)]
pub struct Budget {
    state: Mutex<State>,
    settled: Notify,
}

impl Budget {
    pub fn new(ceilings: Vec<Ceiling>) -> Arc<Budget> {
        Arc::new(Budget {
            state: Mutex::new(State {
                ceilings,
                ..State::default()
            }),
            settled: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Settled spend of this job in micro-dollars.
    pub fn spent(&self) -> i64 {
        self.lock().spent
    }

    /// What the tightest ceiling leaves after the settled spend; `None`
    /// without a ceiling.
    pub fn left(&self) -> Option<i64> {
        let st = self.lock();
        tightest(&st.ceilings).map(|c| c.room().saturating_sub(st.spent))
    }

    /// True once a call was refused because a ceiling was spent.
    pub fn held(&self) -> bool {
        self.lock().held
    }

    /// Admits call `seq` with its reservation `worst` (alone, or beside
    /// the calls in flight: [`InputReckoning`]), waiting for calls in
    /// flight to settle while the reservation does not fit.
    pub async fn admit(self: &Arc<Self>, seq: u64, worst: WorstCase) -> Admission {
        loop {
            let notified = self.settled.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut st = self.lock();
                let Some(ceiling) = tightest(&st.ceilings) else {
                    st.flights.insert(seq, (0, 0));
                    return Admission::Admitted(self.reservation(seq, InputReckoning::Alone));
                };
                let room = ceiling.room();
                if st.spent >= room {
                    st.held = true;
                    return Admission::Refused(ceiling.exhausted_message(st.spent));
                }
                let committed: i64 = st
                    .flights
                    .values()
                    .map(|(reserved, running)| (*reserved).max(*running))
                    .fold(st.spent, i64::saturating_add);
                let now = match st.flights.is_empty() {
                    true => Some((worst.alone, InputReckoning::Alone)),
                    false => worst.beside.map(|b| (b, InputReckoning::Beside)),
                };
                if let Some((estimate, input)) =
                    now.filter(|(e, _)| committed.saturating_add(*e) <= room)
                {
                    st.flights.insert(seq, (estimate, 0));
                    return Admission::Admitted(self.reservation(seq, input));
                }
                // Even with every call in flight settled at nothing (and
                // this one then alone), the worst case would not fit:
                // refused now.
                if st.spent.saturating_add(worst.alone) > room {
                    st.held = true;
                    return Admission::Refused(ceiling.worst_case_message(st.spent, worst.alone));
                }
            }
            notified.await;
        }
    }

    /// What other jobs have spent against the `scope` ceiling, as just read
    /// from the ledger. Waiting calls are re-checked against it.
    pub fn set_prior(&self, scope: Scope, prior_micros: i64) {
        {
            let mut st = self.lock();
            for c in st.ceilings.iter_mut().filter(|c| c.scope == scope) {
                c.prior_micros = prior_micros;
            }
        }
        self.settled.notify_waiters();
    }

    /// The ceilings as they stand (with the latest spend of other jobs).
    pub fn ceilings(&self) -> Vec<Ceiling> {
        self.lock().ceilings.clone()
    }

    fn reservation(self: &Arc<Self>, seq: u64, input: InputReckoning) -> Reservation {
        Reservation {
            budget: self.clone(),
            seq,
            input,
            settled: false,
        }
    }

    /// Records call `seq`'s running cost; `Some(message)` when the stream
    /// must be cut because its growth took the job past its tightest ceiling.
    fn observe(&self, seq: u64, running: i64) -> Option<String> {
        let mut st = self.lock();
        let ceiling = tightest(&st.ceilings)?;
        let grew = match st.flights.get_mut(&seq) {
            Some(flight) if running > flight.1 => {
                flight.1 = running;
                true
            }
            _ => false,
        };
        let total: i64 = st
            .flights
            .values()
            .map(|(_, r)| *r)
            .fold(st.spent, i64::saturating_add);
        if !(grew && total > ceiling.room()) {
            return None;
        }
        st.held = true;
        Some(format!(
            "paddock broker: {} reached ({} of {} with the calls under way): the response was cut; the job is held",
            ceiling.scope.describe(),
            format_usd(ceiling.prior_micros.saturating_add(total)),
            format_usd(ceiling.limit_micros)
        ))
    }

    fn settle(&self, seq: u64, cost: i64) {
        {
            let mut st = self.lock();
            st.flights.remove(&seq);
            st.spent = st.spent.saturating_add(cost);
        }
        self.settled.notify_waiters();
    }
}

/// An admitted call's claim on the budget. Settle it with the metered cost;
/// dropped unsettled (the call never reached the upstream) it releases its
/// reservation at no cost.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<Budget>,
    seq: u64,
    input: InputReckoning,
    settled: bool,
}

impl Reservation {
    /// How the call's input was reckoned when it was admitted: its worst
    /// case, as its row written ahead holds it.
    pub fn input(&self) -> InputReckoning {
        self.input
    }

    /// Updates the call's running cost; `Some(message)` when the stream
    /// must be cut.
    pub fn observe(&self, running_micros: i64) -> Option<String> {
        self.budget.observe(self.seq, running_micros)
    }

    pub fn settle(mut self, cost_micros: i64) {
        self.settled = true;
        self.budget.settle(self.seq, cost_micros);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.settled {
            self.budget.settle(self.seq, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use std::time::Duration;

    use super::*;

    fn job(limit: i64) -> Arc<Budget> {
        Budget::new(vec![Ceiling {
            scope: Scope::Job,
            limit_micros: limit,
            prior_micros: 0,
        }])
    }

    fn admitted(a: Admission) -> Reservation {
        match a {
            Admission::Admitted(r) => r,
            Admission::Refused(m) => panic!("refused: {m}"),
        }
    }

    #[tokio::test]
    async fn reservations_that_do_not_fit_wait_instead_of_refusing() {
        let b = job(1_000);
        let r1 = admitted(b.admit(1, WorstCase::fixed(600)).await);
        // 600 + 600 > 1000: the second call waits for the first to settle.
        let b2 = b.clone();
        let second = tokio::spawn(async move { b2.admit(2, WorstCase::fixed(600)).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!second.is_finished());
        r1.settle(100);
        let r2 = admitted(second.await.unwrap());
        r2.settle(900);
        assert_eq!(b.spent(), 1_000);
        match b.admit(3, WorstCase::fixed(1)).await {
            Admission::Refused(m) => assert_eq!(
                m,
                "paddock broker: job budget spent ($0.001000 of $0.001000); the job is held"
            ),
            Admission::Admitted(_) => panic!("admitted past the ceiling"),
        }
        assert!(b.held());
    }

    /// A call whose worst case does not fit what is left is refused, even
    /// alone, before it runs; one that fits is admitted, and a stream that
    /// grows past its reservation is still cut at the ceiling.
    #[tokio::test]
    async fn a_call_whose_worst_case_does_not_fit_is_refused() {
        let b = job(6_000);
        match b.admit(1, WorstCase::fixed(50_900)).await {
            Admission::Refused(m) => assert_eq!(
                m,
                "paddock broker: job budget: this call could cost up to $0.050900 (its input and the most output it may produce), more than the $0.006000 left ($0.000000 of $0.006000 spent); the job is held"
            ),
            Admission::Admitted(_) => panic!("admitted a worst case past the ceiling"),
        }
        assert!(b.held());
        assert_eq!(b.spent(), 0);
        let b = job(1_000);
        let r = admitted(b.admit(1, WorstCase::fixed(900)).await);
        assert_eq!(r.observe(900), None);
        assert_eq!(
            r.observe(1_001).as_deref(),
            Some("paddock broker: job budget reached ($0.001001 of $0.001000 with the calls under way): the response was cut; the job is held")
        );
        r.settle(1_001);
        assert!(matches!(
            b.admit(2, WorstCase::fixed(1)).await,
            Admission::Refused(_)
        ));
    }

    /// A call beside others in flight reserves its worst case reckoned at
    /// one token a byte, and waits while that does not fit even if its
    /// bytes / 4 would; a call whose input its bytes do not bound waits
    /// until it is alone; a worst case that does not fit alone is refused
    /// at once. Before, every call reserved its bytes / 4 however many ran
    /// beside it, and each could pass its estimate.
    #[tokio::test]
    async fn calls_beside_others_reserve_their_inputs_most() {
        let b = job(1_000);
        let reckoned = |a: &Reservation| a.input();
        let first = admitted(
            b.admit(
                1,
                WorstCase {
                    alone: 100,
                    beside: Some(400),
                },
            )
            .await,
        );
        let second = admitted(
            b.admit(
                2,
                WorstCase {
                    alone: 100,
                    beside: Some(400),
                },
            )
            .await,
        );
        let (b3, b4) = (b.clone(), b.clone());
        // 100 + 400 + 600 > 1000: waits, though its 100 alone would fit.
        let third = tokio::spawn(async move {
            b3.admit(
                3,
                WorstCase {
                    alone: 100,
                    beside: Some(600),
                },
            )
            .await
        });
        // An image: only alone.
        let image = tokio::spawn(async move {
            b4.admit(
                4,
                WorstCase {
                    alone: 50,
                    beside: None,
                },
            )
            .await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let waiting = (third.is_finished(), image.is_finished());
        first.settle(0);
        let third = admitted(third.await.unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
        let image_waits = image.is_finished();
        let third_input = reckoned(&third);
        second.settle(100);
        third.settle(100);
        let image = admitted(image.await.unwrap());
        let refused = match b
            .admit(
                5,
                WorstCase {
                    alone: 801,
                    beside: Some(801),
                },
            )
            .await
        {
            Admission::Refused(m) => m,
            Admission::Admitted(_) => panic!("admitted a worst case past the ceiling"),
        };
        assert_eq!(
            (
                waiting,
                image_waits,
                [third_input, reckoned(&image)],
                refused
            ),
            (
                (false, false),
                false,
                [InputReckoning::Beside, InputReckoning::Alone],
                "paddock broker: job budget: this call could cost up to $0.000801 (its input and the most output it may produce), more than the $0.000800 left ($0.000200 of $0.001000 spent); the job is held".to_string()
            )
        );
        drop(image);
        let sixth = admitted(
            b.admit(
                6,
                WorstCase {
                    alone: 1,
                    beside: None,
                },
            )
            .await,
        );
        assert_eq!((reckoned(&sixth), b.spent()), (InputReckoning::Alone, 200));
    }

    #[tokio::test]
    async fn a_dropped_reservation_costs_nothing() {
        let b = job(10);
        drop(admitted(b.admit(1, WorstCase::fixed(10)).await));
        assert_eq!(b.spent(), 0);
        admitted(b.admit(2, WorstCase::fixed(10)).await).settle(3);
        assert_eq!(b.spent(), 3);
    }

    #[tokio::test]
    async fn the_tightest_ceiling_binds_and_prior_spend_counts() {
        let b = Budget::new(vec![
            Ceiling {
                scope: Scope::Job,
                limit_micros: 5_000_000,
                prior_micros: 0,
            },
            Ceiling {
                scope: Scope::Ticket,
                limit_micros: 3_000_000,
                prior_micros: 2_999_000,
            },
        ]);
        admitted(b.admit(1, WorstCase::fixed(10)).await).settle(1_000);
        match b.admit(2, WorstCase::fixed(10)).await {
            Admission::Refused(m) => assert_eq!(
                m,
                "paddock broker: ticket budget (across attempts) spent ($3.000000 of $3.000000); the job is held"
            ),
            Admission::Admitted(_) => panic!("admitted past the ticket ceiling"),
        }
        let spent = [Ceiling {
            scope: Scope::ProjectDay,
            limit_micros: 1,
            prior_micros: 1,
        }];
        assert_eq!(exhausted_before_start(&spent), Some(spent[0]));
        assert_eq!(exhausted_before_start(&[]), None);
    }

    #[test]
    fn estimates_are_the_worst_case() {
        let prices = PriceTable::vendored().unwrap();
        // gpt-5.5: 4000 bytes → 1000 input tokens × $5/M = 5000 µ$; output
        // at most the model's 128 000 tokens × $30/M = 3 840 000 µ$.
        assert_eq!(
            estimate_micros(
                &prices,
                "gpt-5.5",
                4_000,
                Some(1_000_000),
                1,
                InputReckoning::Alone
            ),
            3_845_000
        );
        assert_eq!(
            estimate_micros(
                &prices,
                "gpt-5.5",
                4_000,
                Some(100),
                1,
                InputReckoning::Alone
            ),
            8_000
        );
        // Three choices of 100 tokens each: 5000 + 300 × $30/M.
        assert_eq!(
            estimate_micros(
                &prices,
                "gpt-5.5",
                4_000,
                Some(100),
                3,
                InputReckoning::Alone
            ),
            14_000
        );
        assert_eq!(
            estimate_micros(&prices, "gpt-5.5", 4_000, None, 1, InputReckoning::Alone),
            3_845_000
        );
        // Above 200 000 input tokens, Sonnet's long-context rates: 250 000 ×
        // $6/M + 1000 × $22.5/M.
        assert_eq!(
            estimate_micros(
                &prices,
                "claude-sonnet-4-5",
                1_000_000,
                Some(1_000),
                1,
                InputReckoning::Alone
            ),
            1_522_500
        );
        // Beside other calls in flight, the input at one token a byte:
        // 4000 × $5/M + 100 × $30/M.
        assert_eq!(
            estimate_micros(
                &prices,
                "gpt-5.5",
                4_000,
                Some(100),
                1,
                InputReckoning::Beside
            ),
            23_000
        );
        // A model without max_output: the default reserve.
        let t = PriceTable::parse(
            "version = \"x\"\n[models.m]\ninput = \"1\"\noutput = \"1\"\n",
            "t",
        )
        .unwrap();
        assert_eq!(
            estimate_micros(&t, "m", 0, None, 1, InputReckoning::Alone),
            32_000
        );
    }
}
