/* tests/support/relative_error.c — see relative_error.h. */
#include "support/relative_error.h"

#include <math.h>

double cinfer_test_relative_error(const float *got, const double *want, int n)
{
    double diff2 = 0, want2 = 0;
    for (int i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        diff2 += d * d;
        want2 += want[i] * want[i];
    }
    return sqrt(diff2 / want2);
}
