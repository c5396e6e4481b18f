/* chi_square.h — Pearson's goodness of fit for the sampling tests (test_spec_sampling,
 * test_engine_spec_sampled): bins of expected count below 5 merged into one tail bin (that bin, if still
 * below 5, into the smallest other), dof = bins - 1, the p-value Q(dof / 2, chi2 / 2) from a regularized
 * incomplete gamma; a token of probability 0 seen even once gives p-value 0. chi_two: Pearson's homogeneity
 * of two samples (test_fcgi_spec), the same merging by the smaller sample's expected count. */
#ifndef CLGEMMA_CHI_SQUARE_H
#define CLGEMMA_CHI_SQUARE_H
#include <math.h>

/* Q(a, x), the regularized upper incomplete gamma: a series below a + 1, Lentz's continued fraction above */
static inline double gamma_q(double a, double x)
{
    if (x <= 0) return 1;
    double lead = exp(-x + a * log(x) - lgamma(a));
    if (x < a + 1) {
        double ap = a, del = 1 / a, sum = del;
        for (int n = 0; n < 10000 && fabs(del) > fabs(sum) * 1e-16; n++) { ap += 1; del *= x / ap; sum += del; }
        return 1 - sum * lead;
    }
    double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;
    for (int i = 1; i < 10000; i++) {
        double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < 1e-300) d = 1e-300;
        c = b + an / c;
        if (fabs(c) < 1e-300) c = 1e-300;
        d = 1 / d;
        h *= d * c;
        if (fabs(d * c - 1) < 1e-16) break;
    }
    return lead * h;
}

/* Pearson's fit of counts obs[0, nb) (nb <= 512, n in all) to probabilities p[0, nb); the p-value (0 when a
 * token of probability 0 was seen), the statistic and dof out; dof 0 (p-value 1) when one bin is all */
static inline double chi_fit(const double *p, const long *obs, int nb, long n, double *chi2, int *dof)
{
    int ord[512], nbig = 0, ntail = 0;
    double te = 0, to = 0;
    long zero_seen = 0;
    *chi2 = 0;
    for (int i = 0; i < nb; i++) {
        if (p[i] <= 0) { zero_seen += obs[i]; continue; }
        if (n * p[i] >= 5) ord[nbig++] = i;
        else { te += n * p[i]; to += obs[i]; ntail++; }
    }
    if (zero_seen) { *chi2 = INFINITY; *dof = 0; return 0; }
    double s = 0;
    int bins = nbig;
    if (ntail) {
        if (te < 5 && nbig) { /* the tail into the smallest other bin */
            int m = 0;
            for (int j = 1; j < nbig; j++)
                if (p[ord[j]] < p[ord[m]]) m = j;
            te += n * p[ord[m]];
            to += obs[ord[m]];
            ord[m] = ord[--nbig];
            bins = nbig;
        }
        s += (to - te) * (to - te) / te;
        bins++;
    }
    for (int j = 0; j < nbig; j++) {
        double e = n * p[ord[j]];
        s += (obs[ord[j]] - e) * (obs[ord[j]] - e) / e;
    }
    *chi2 = s;
    *dof = bins - 1;
    return *dof > 0 ? gamma_q(*dof / 2.0, s / 2) : 1;
}

/* Pearson's two-sample homogeneity of counts a[0, nb) and b[0, nb) (nb <= 512): are they draws of one
 * distribution? Bins whose smaller expected count (its pooled share of either sample) is below 5 merge into
 * a tail bin (that bin, if still below 5, into the smallest other); the p-value, the statistic and dof =
 * bins - 1 out; dof 0 (p-value 1) when one bin is all */
static inline double chi_two(const long *a, const long *b, int nb, double *chi2, int *dof)
{
    long na = 0, nbt = 0;
    for (int i = 0; i < nb; i++) { na += a[i]; nbt += b[i]; }
    double fa = (double)na / (na + nbt), fb = 1 - fa, fmin = fa < fb ? fa : fb;
    long ca[513], cb[513];
    int bins = 0, tail = -1;
    for (int i = 0; i < nb; i++) {
        if (!a[i] && !b[i]) continue;
        if ((a[i] + b[i]) * fmin >= 5) { ca[bins] = a[i]; cb[bins++] = b[i]; continue; }
        if (tail < 0) { tail = 512; ca[tail] = cb[tail] = 0; }
        ca[tail] += a[i];
        cb[tail] += b[i];
    }
    if (tail >= 0) {
        if ((ca[tail] + cb[tail]) * fmin < 5 && bins) { /* the tail into the smallest other bin */
            int m = 0;
            for (int j = 1; j < bins; j++)
                if (ca[j] + cb[j] < ca[m] + cb[m]) m = j;
            ca[tail] += ca[m];
            cb[tail] += cb[m];
            ca[m] = ca[bins - 1];
            cb[m] = cb[--bins];
        }
        ca[bins] = ca[tail];
        cb[bins++] = cb[tail];
    }
    double s = 0;
    for (int j = 0; j < bins; j++) {
        double t = (double)(ca[j] + cb[j]), ea = t * fa, eb = t * fb;
        s += (ca[j] - ea) * (ca[j] - ea) / ea + (cb[j] - eb) * (cb[j] - eb) / eb;
    }
    *chi2 = s;
    *dof = bins - 1;
    return *dof > 0 ? gamma_q(*dof / 2.0, s / 2) : 1;
}

#endif
