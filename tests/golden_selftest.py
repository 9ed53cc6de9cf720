#!/usr/bin/env python3
"""Unit test of tests/golden.py's comparison of outputs (CTest golden.selftest): float values
of print output may differ within the tolerance (FLOAT_RTOL), and nothing else may differ."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden  # noqa: E402

BASE = """\
out: f32[2,4]
[[-0.0669359, 0.0302114, 0.0995825, 0.0773979],
 [0.0245159, 0.128447, 0.114285, -0.00495061]]
loss: f32[] = 0.42
steps: i32[3]
[1, 2, 3]
ok: bool[2]
[true, false]
h: bf16[2]
[0.5, 1.5]
half: f16[2]
[0.0999756, 2]
acc: f64[1,2]
[[1.5, -2.25]]
== shmap collective stats ==
collective      calls   bytes_sent   bytes_received
psum                3          288              288
"""


def changed(old, new, text=BASE):
    assert old in text, old
    return text.replace(old, new, 1)


class Compare(unittest.TestCase):
    def passes(self, actual, expected=BASE):
        c = golden.compare_outputs(expected, actual)
        self.assertTrue(c.ok, "\n".join(c.problems))
        return c

    def fails(self, actual, expected=BASE, mentioning=()):
        c = golden.compare_outputs(expected, actual)
        self.assertFalse(c.ok, "should differ:\n" + actual)
        for word in mentioning:
            self.assertIn(word, "\n".join(c.problems))
        return c

    def test_identical(self):
        c = self.passes(BASE)
        self.assertEqual(c.differing, 0)

    def test_last_digit_differences_pass(self):
        # the differences seen across CPUs (oneDNN / OpenBLAS kernels chosen at run time)
        c = self.passes(changed("-0.00495061", "-0.00495067"))
        self.assertEqual(c.differing, 1)
        self.passes(changed("0.0302114", "0.0302115"))
        self.passes(changed("loss: f32[] = 0.42", "loss: f32[] = 0.420001"))
        self.passes(changed("[[1.5, -2.25]]", "[[1.50001, -2.25]]"))
        self.passes("d: f32[2]\n[-0.0242409, 0.1]\n", "d: f32[2]\n[-0.024241, 0.1]\n")

    def test_cancellation_near_zero_in_an_array_passes(self):
        # a value that is the small difference of O(1) numbers moves as much as they do
        self.passes("g: f32[3]\n[1.5, -2e-07, 0.75]\n", "g: f32[3]\n[1.5, 3.1e-08, 0.75]\n")
        self.passes("g: f32[2]\n[1, 0]\n", "g: f32[2]\n[1, 1.19209e-07]\n")

    def test_negative_zero_passes(self):
        self.passes(changed("[1.5, -2.25]", "[1.5, -2.25]").replace("0.5, 1.5", "0.5, 1.5"))
        self.passes("z: f32[2]\n[-0, 1]\n", "z: f32[2]\n[0, 1]\n")

    def test_one_percent_fails(self):
        self.fails(changed("0.128447", "0.129731"), mentioning=["element [1,1]", "0.128447", "0.129731"])
        self.fails(changed("loss: f32[] = 0.42", "loss: f32[] = 0.4242"))
        self.fails(changed("[[1.5, -2.25]]", "[[1.515, -2.25]]"), mentioning=["f64"])
        self.fails(changed("[0.0999756, 2]", "[0.0999756, 2.02]"), mentioning=["f16"])
        self.fails(changed("[0.5, 1.5]", "[0.5, 1.51562]"), mentioning=["bf16"])  # 1%: two bf16 ulps of 1.5

    def test_sign_flip_fails(self):
        self.fails(changed("-0.0669359", "0.0669359"), mentioning=["element [0,0]"])
        self.fails(changed("-0.00495061", "0.00495061"), mentioning=["element [1,3]"])
        self.fails(changed("loss: f32[] = 0.42", "loss: f32[] = -0.42"))

    def test_one_ulp_of_bf16_and_f16_passes(self):
        # bf16 1 + 2^-7 and f16 1 + 2^-10 (printed rounded up), next to 1
        self.passes("x: bf16[] = 1.00781\n", "x: bf16[] = 1\n")
        self.passes("x: f16[] = 1.00098\n", "x: f16[] = 1\n")
        self.passes("x: f16[] = 1.00195\n", "x: f16[] = 1\n")          # two ulps
        # a bf16 sum of several members rounded one ulp the other way (--reduce-locally-first)
        self.passes("psum bf16: bf16[1]\n[262]\n", "psum bf16: bf16[1]\n[264]\n")
        # ... but not a bf16 accumulator that stopped at 256
        self.fails("psum bf16: bf16[1]\n[256]\n", "psum bf16: bf16[1]\n[264]\n")
        self.fails("x: bf16[] = 1.01562\n", "x: bf16[] = 1\n")          # two bf16 ulps
        self.fails("x: f16[] = 1.00293\n", "x: f16[] = 1\n")           # three f16 ulps

    def test_f64_last_digit(self):
        self.passes("x: f64[] = 1.00001\n", "x: f64[] = 1\n")
        self.fails("x: f64[] = 1.00003\n", "x: f64[] = 1\n")

    def test_tolerance_is_per_dtype(self):
        # 0.1% passes for bf16 (below one ulp, 2^-8 relative) but not for f32
        self.passes("x: bf16[2]\n[1.001, 3]\n", "x: bf16[2]\n[1, 3]\n")
        self.fails("x: f32[2]\n[1.001, 3]\n", "x: f32[2]\n[1, 3]\n")

    def test_integer_differences_fail(self):
        self.fails(changed("[1, 2, 3]", "[1, 2, 4]"), mentioning=["steps: i32[3] element [2]"])
        self.fails("n: i64[] = 16777217\n", "n: i64[] = 16777216\n")
        self.fails(changed("[true, false]", "[true, true]"), mentioning=["bool"])

    def test_header_and_shape_differences_fail(self):
        self.fails(changed("out: f32[2,4]", "out: f32[4,2]"))
        self.fails(changed("out: f32[2,4]", "Out: f32[2,4]"))
        self.fails(changed("steps: i32[3]", "steps: i64[3]"))
        self.fails(changed("acc: f64[1,2]", "acc: f32[1,2]"))
        # the same values laid out differently
        self.fails(changed("acc: f64[1,2]\n[[1.5, -2.25]]", "acc: f64[2]\n[1.5, -2.25]"))
        self.fails(changed(" [0.0245159", "[0.0245159"))  # indentation
        self.fails(changed("0.0302114, 0.0995825", "0.0302114,0.0995825"))  # separators

    def test_nan_and_inf_must_match(self):
        self.passes("x: f32[2]\n[nan, inf]\n", "x: f32[2]\n[nan, inf]\n")
        self.fails("x: f32[2]\n[nan, 1]\n", "x: f32[2]\n[1, 1]\n", mentioning=["nan"])
        self.fails("x: f32[2]\n[1, 1]\n", "x: f32[2]\n[nan, 1]\n")
        self.fails("x: f32[2]\n[inf, 1]\n", "x: f32[2]\n[-inf, 1]\n")
        self.fails("x: f32[2]\n[inf, 1]\n", "x: f32[2]\n[3.40282e+38, 1]\n")
        self.fails("x: f32[] = nan\n", "x: f32[] = 0\n")

    def test_text_differences_fail(self):
        self.fails(changed("psum                3", "psum                4"))   # --stats table
        self.fails(changed("== shmap collective stats ==\n", ""))
        self.fails(BASE + "[exit status 2]\nshmap runtime error: boom\n")
        self.fails("[exit status 2]\nshmap runtime error: take: index 7\n",
                   "[exit status 2]\nshmap runtime error: take: index 6\n")
        self.fails(BASE + "extra\n")
        self.fails(BASE.replace("loss: f32[] = 0.42\n", ""))
        # numbers in free text are text, not float values
        self.fails("after 0.5 s\n", "after 0.50001 s\n")

    def test_an_added_or_missing_row_fails(self):
        self.fails(changed(",\n [0.0245159, 0.128447, 0.114285, -0.00495061]]", "]"))

    def test_labels_with_colons(self):
        text = "ring loop (over (x, y)): tangent 0: f32[3]\n[6.45866, -1.44635, 10.583]\n"
        self.passes(text.replace("10.583", "10.5831"), text)
        self.fails(text.replace("10.583", "10.7"), text, mentioning=["tangent 0: f32[3] element [2]"])

    def test_print_without_label(self):
        text = "f32[2,2]\n[[1, 2],\n [3, 4]]\nf64[] = 0.5\n"
        self.passes(text.replace("4]]", "4.00001]]"), text)
        self.fails(text.replace("4]]", "4.1]]"), text, mentioning=["element [1,1]"])
        self.fails(text.replace("f64[] = 0.5", "f64[] = 0.51"), text)

    def test_empty_and_high_rank_arrays(self):
        t = "e: f32[0,3]\n[[]]\nt: f32[2,1,2]\n[[[1, 2]],\n [[3, 4]]]\n"
        self.passes(t.replace("[[3, 4]]", "[[3.00001, 4]]"), t)
        self.fails(t.replace("[[3, 4]]", "[[3.1, 4]]"), t, mentioning=["element [1,0,0]"])

    def test_report_of_differences(self):
        c = self.passes(changed("-0.00495061", "-0.00495067"))
        self.assertIn("f32", golden.describe_differences(c))
        self.assertAlmostEqual(c.max_rel["f32"][0], 6e-8 / 0.00495067, places=9)


class HarnessText(unittest.TestCase):
    def test_harness_failure_text_is_recognised(self):
        for text in ["expected exit status 1, got 0\nstdout:\n\nstderr:\n",
                     "compile failed (status 2):\nshmapc: internal error: boom\n",
                     "x: f32[] = 1\n[exit status -11]\n",
                     "==123==ERROR: AddressSanitizer: heap-buffer-overflow\n",
                     "runtime/kernels.cpp:12:3: runtime error: signed integer overflow\n",
                     "Traceback (most recent call last):\n",
                     "Segmentation fault (core dumped)\n"]:
            self.assertIsNotNone(golden.harness_failure(text), text)

    def test_update_refuses_crashes(self):
        self.assertIsNone(golden.run_refusal(0, "", ""))
        self.assertIsNone(golden.run_refusal(1, "prog: error: --steps=1e3 is not an i32 value\n", ""))
        self.assertIsNone(golden.run_refusal(2, "shmap runtime error: take: index 6 is out of range\n", ""))
        self.assertIn("signal 11", golden.run_refusal(-11, "", ""))
        self.assertIn("status 134", golden.run_refusal(134, "free(): invalid pointer\n", ""))
        self.assertIn("status 2", golden.run_refusal(2, "terminate called after throwing\n", "x\n"))
        # a status the expected output records is kept
        self.assertIsNone(golden.run_refusal(3, "bye\n", "x: f32[] = 1\n[exit status 3]\nbye\n"))

    def test_intended_errors_are_not_harness_text(self):
        for text in ["[exit status 2]\nshmap runtime error: take: index 6 is out of range for an axis of size 4\n",
                     "[exit status 1]\nprog: error: --steps=1e3 is not an i32 value\n",
                     "tests/errors/x.smp:4:9: error: x has no attribute T [unknown-name]\n"]:
            self.assertIsNone(golden.harness_failure(text), text)


if __name__ == "__main__":
    unittest.main()
