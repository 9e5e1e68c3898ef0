//! Tool-call trigger agreement with a reference, as the vendor verifier defines it:
//! a case is "triggered" on a side when that side ends with
//! `finish_reason == "tool_calls"`; the reference is the truth. Schema accuracy is
//! the share of the tested side's triggered calls whose arguments pass the schema.

use serde::Serialize;

/// The trigger confusion matrix (tested side against the reference).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Confusion {
    /// Both ended with `tool_calls`.
    pub tp: u64,
    /// Only the tested side did.
    pub fp: u64,
    /// Only the reference did.
    pub fn_: u64,
    /// Neither did.
    pub tn: u64,
}

/// A proportion's 95% Wilson score interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// Lower bound, 0..1.
    pub low: f64,
    /// Upper bound, 0..1.
    pub high: f64,
}

/// What a comparison measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallScore {
    /// The trigger matrix: tested against reference.
    pub confusion: Confusion,
    /// TP / (TP + FP), 0..1 (0 when the tested side never triggered).
    pub precision: f64,
    /// TP / (TP + FN), 0..1 (0 when the reference never triggered).
    pub recall: f64,
    /// 2TP / (2TP + FP + FN), 0..1; 1 when neither side ever triggered.
    pub f1: f64,
    /// F1's interval: the Wilson interval of the agreement share 2TP/(2TP+FP+FN)
    /// over its own denominator (F1 is that share).
    pub f1_interval: Option<Interval>,
    /// Triggered calls on the tested side, and those whose arguments passed.
    pub triggered: u64,
    /// Of the triggered calls, those whose arguments passed the tool's schema.
    pub schema_valid: u64,
    /// `schema_valid / triggered`, 0..1 (0 without triggered calls).
    pub schema_accuracy: f64,
    /// The 95% Wilson interval of `schema_accuracy`; `None` without triggered calls.
    pub schema_interval: Option<Interval>,
}

/// The verifier's summary field names, for side-by-side comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerifierSummary {
    /// Cases with an answer from both sides.
    pub success_count: u64,
    /// Cases where the tested side failed.
    pub failure_count: u64,
    /// Tested answers that ended with `finish_reason: stop`.
    pub finish_stop: u64,
    /// Tested answers that ended with `finish_reason: tool_calls`.
    pub finish_tool_calls: u64,
    /// Tested answers that ended otherwise.
    pub finish_others: u64,
    /// Triggered calls whose arguments failed the schema.
    pub schema_validation_error_count: u64,
    /// Triggered calls whose arguments passed the schema.
    pub successful_tool_call_count: u64,
    /// [`ToolCallScore::precision`].
    pub tool_call_precision: f64,
    /// [`ToolCallScore::recall`].
    pub tool_call_recall: f64,
    /// [`ToolCallScore::f1`].
    pub tool_call_f1: f64,
    /// [`ToolCallScore::schema_accuracy`].
    pub schema_accuracy: f64,
}

impl Confusion {
    /// Adds one case: did each side end with `tool_calls`?
    pub fn add(&mut self, tested: bool, reference: bool) {
        match (tested, reference) {
            (true, true) => self.tp += 1,
            (true, false) => self.fp += 1,
            (false, true) => self.fn_ += 1,
            (false, false) => self.tn += 1,
        }
    }

    /// Cases in the matrix.
    pub fn total(&self) -> u64 {
        self.tp + self.fp + self.fn_ + self.tn
    }

    /// TP / (TP + FP); 0 when the tested side never triggered.
    pub fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }

    /// TP / (TP + FN); 0 when the reference never triggered.
    pub fn recall(&self) -> f64 {
        ratio(self.tp, self.tp + self.fn_)
    }

    /// F1 = 2TP / (2TP + FP + FN); 1 when neither side ever triggered.
    pub fn f1(&self) -> f64 {
        let d = 2 * self.tp + self.fp + self.fn_;
        if d == 0 {
            1.0
        } else {
            ratio(2 * self.tp, d)
        }
    }
}

fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

/// The 95% Wilson score interval of `k` successes in `n`; none when `n` is 0.
pub fn wilson(k: u64, n: u64) -> Option<Interval> {
    if n == 0 {
        return None;
    }
    let z = 1.959_963_984_540_054_f64;
    let (n, p) = (n as f64, k as f64 / n as f64);
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denom;
    Some(Interval {
        low: (centre - half).max(0.0),
        high: (centre + half).min(1.0),
    })
}

impl ToolCallScore {
    /// Scores a confusion matrix and the tested side's schema results.
    pub fn new(confusion: Confusion, triggered: u64, schema_valid: u64) -> ToolCallScore {
        let c = confusion;
        ToolCallScore {
            confusion: c,
            precision: c.precision(),
            recall: c.recall(),
            f1: c.f1(),
            f1_interval: wilson(2 * c.tp, 2 * c.tp + c.fp + c.fn_),
            triggered,
            schema_valid,
            schema_accuracy: ratio(schema_valid, triggered),
            schema_interval: wilson(schema_valid, triggered),
        }
    }

    /// The same numbers under the verifier's field names; `finish` counts the tested
    /// side's finish reasons (stop, tool_calls, other) and `failures` its failed requests.
    pub fn verifier_summary(&self, finish: [u64; 3], failures: u64) -> VerifierSummary {
        VerifierSummary {
            success_count: self.confusion.total(),
            failure_count: failures,
            finish_stop: finish[0],
            finish_tool_calls: finish[1],
            finish_others: finish[2],
            schema_validation_error_count: self.triggered - self.schema_valid,
            successful_tool_call_count: self.schema_valid,
            tool_call_precision: self.precision,
            tool_call_recall: self.recall,
            tool_call_f1: self.f1,
            schema_accuracy: self.schema_accuracy,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(pairs: &[(bool, bool)]) -> Confusion {
        let mut c = Confusion::default();
        for &(t, r) in pairs {
            c.add(t, r);
        }
        c
    }

    #[test]
    fn f1_of_a_known_matrix_is_exact() {
        // 6 TP, 2 FP, 1 FN, 3 TN: P = 6/8, R = 6/7, F1 = 12/15.
        let mut pairs = vec![(true, true); 6];
        pairs.extend([(true, false); 2]);
        pairs.push((false, true));
        pairs.extend([(false, false); 3]);
        let s = ToolCallScore::new(matrix(&pairs), 8, 7);
        assert_eq!(
            s.confusion,
            Confusion {
                tp: 6,
                fp: 2,
                fn_: 1,
                tn: 3
            }
        );
        assert_eq!(s.precision, 0.75);
        assert_eq!(s.recall, 6.0 / 7.0);
        assert_eq!(s.f1, 0.8);
        assert_eq!(s.schema_accuracy, 0.875);
        let i = s.f1_interval.unwrap();
        assert!(i.low < 0.8 && 0.8 < i.high && i.low > 0.5, "{i:?}");
        let v = s.verifier_summary([3, 8, 1], 0);
        assert_eq!(v.schema_validation_error_count, 1);
        assert_eq!(v.successful_tool_call_count, 7);
        assert_eq!(v.tool_call_f1, 0.8);
        assert_eq!(v.success_count, 12);
    }

    #[test]
    fn no_trigger_on_either_side_is_full_agreement() {
        let s = ToolCallScore::new(matrix(&[(false, false); 4]), 0, 0);
        assert_eq!(s.f1, 1.0);
        assert_eq!(s.schema_interval, None);
    }

    #[test]
    fn wilson_interval_narrows_with_sample_size() {
        let small = wilson(8, 10).unwrap();
        let large = wilson(800, 1000).unwrap();
        assert!(small.high - small.low > 3.0 * (large.high - large.low));
        assert!(wilson(10, 10).unwrap().high > 1.0 - 1e-9);
        assert!((wilson(5, 10).unwrap().low - 0.2366).abs() < 1e-3);
    }
}
