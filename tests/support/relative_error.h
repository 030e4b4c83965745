/* tests/support/relative_error.h — how far a row of logits is from the float64
 * reference's: the reference tests' one measure. */
#ifndef CINFER_TEST_RELATIVE_ERROR_H
#define CINFER_TEST_RELATIVE_ERROR_H

/* ||got - want|| / ||want|| over n values (Euclidean norms). NaN stays NaN (and fails a bound). */
double cinfer_test_relative_error(const float *got, const double *want, int n);

#endif
