/* Without any OpenCL driver (run with OCL_ICD_VENDORS=/nonexistent), the device list still
 * has the OpenMP reference, a hint names the package to install, and auto falls back. */
#include "../data/tcheck.h"

int main(void) {
    tc_begin("no OpenCL driver: omp listed, hint given, auto falls back");
    int n = -1;
    CHECK_OK(cn_device_count(&n));
    CHECK(n == 1, "%d devices", n);
    cn_device_info info;
    CHECK_OK(cn_device_info_get(0, &info));
    CHECK(strcmp(info.selector, "omp") == 0, "device 0 is %s", info.selector);
    CHECK(strstr(cn_device_hint(), "pocl-opencl-icd") != NULL, "hint: '%s'", cn_device_hint());
    cn_device *d = NULL;
    CHECK_OK(cn_device_open("auto", &d));
    CHECK(d && strcmp(cn_device_selector(d), "omp") == 0);
    cn_device_release(d);
    CHECK_ERR(cn_device_open("cpu", &d), CN_ERR_NOT_FOUND, "pocl-opencl-icd");
    tc_end();
    return tc_finish();
}
