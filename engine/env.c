/* The on/off environment variables, read by one rule. Before, each reader had its own: most
 * took anything but "0" as on, CLNET_CACHE anything but "0" as on, CLNET_MPI_OVERLAP only
 * "0" as off, so a typo ("ture", "off") silently meant the opposite of what was asked.
 * CLNET_EMULATE_GPU was already strict; now they all are. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

cn_status cn_env_flag(const char *name, int dflt, int *on) {
    const char *e = getenv(name);
    *on = dflt;
    if (!e || !*e) return CN_OK;
    if (strcmp(e, "0") == 0 || strcmp(e, "1") == 0) {
        *on = e[0] == '1';
        return CN_OK;
    }
    return cn_errorf(CN_ERR_INVALID_ARG, "%s=\"%.100s\" is not 0 or 1 (unset or empty: %s)", name, e,
                     dflt ? "on" : "off");
}

cn_status cn_env_check_flags(void) {
    static const struct {
        const char *name;
        int dflt;
    } flags[] = {{"CLNET_LOG_PLACEMENT", 0}, {"CLNET_PROFILE", 0}, {"CLNET_CACHE", 1},
                 {"CLNET_MPI_OVERLAP", 1},   {"CLNET_EMULATE_GPU", 0}, {"CLNET_FOLD_WEIGHTS", 1}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        int on;
        CN_TRY(cn_env_flag(flags[i].name, flags[i].dflt, &on));
    }
    return CN_OK;
}
