/* cn_op_cast: a value converted to another float storage type (engine/storage.h). The public
 * face of the CAST op; mixed precision is built from it (parameters cast to 16 bits where
 * they are used, the gradient cast back to the f32 master by CAST's own backward). */
#include "internal.h"
#include "program.h"

cn_value cn_op_cast(cn_program *p, cn_value x, cn_dtype dt) {
    cn_op_params prm = {0};
    prm.variant = (int32_t)dt;
    return cn_prog_op(p, CN_OP_CAST, 1, &x, &prm);
}
