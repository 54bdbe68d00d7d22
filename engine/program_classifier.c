/* A program built elsewhere (an imported ONNX model) made into the classifier program the
 * trainer runs: the same inputs, outputs and loss cn_model_program gives a model file, so
 * training, evaluation, replicas and MPI do not care where the program came from. */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "program.h"

cn_status cn_program_make_classifier(cn_program *p, const char *output) {
    if (!p) return cn_errorf(CN_ERR_INVALID_ARG, "cn_program_make_classifier: NULL program");
    CN_TRY(cn_program_status(p));
    if (p->n_inputs != 1)
        return cn_errorf(CN_ERR_INVALID_ARG, "a classifier takes one input (the images); this program takes %d",
                         p->n_inputs);
    static const char *const taken[] = {"labels", "correct", "loss"};
    for (int i = 0; i < 3; i++)
        if ((i == 0 ? cn_program_find_input(p, taken[i]) : cn_program_find_output(p, taken[i])) >= 0)
            return cn_errorf(CN_ERR_INVALID_ARG, "the program already has %s '%s', which the classifier adds",
                             i == 0 ? "an input" : "an output", taken[i]);
    if (p->n_outputs < 1) return cn_errorf(CN_ERR_INVALID_ARG, "the program has no output to classify with");
    /* a model clnet exported names its logits (and its probabilities, kept as they are) */
    int k = output ? cn_program_find_output(p, output) : cn_program_find_output(p, "logits");
    if (!output && k < 0) k = 0;
    if (k < 0) return cn_errorf(CN_ERR_NOT_FOUND, "the program has no output '%s'", output);
    const char *name = p->outputs[k].name;
    int in_node = p->inputs[0].node;
    const cn_node *n = &p->g.nodes[p->outputs[k].node];
    char sb[96];
    if (p->spec[in_node].shape.d[0] != CN_BATCH || n->dtype != CN_F32 || n->shape.ndim != 2 || n->shape.d[0] != 1)
        return cn_errorf(CN_ERR_SHAPE, "output '%s' is %s %s; a classifier's logits are f32 [batch, classes] of an "
                         "input with a free batch", name, cn_dtype_name(n->dtype), cn_shape_str(&n->shape, sb, sizeof sb));
    cn_value logits = cn_prog_value(p, p->outputs[k].node);
    int have_logits = cn_program_find_output(p, "logits");
    if (have_logits >= 0 && p->outputs[have_logits].node != p->outputs[k].node)
        return cn_errorf(CN_ERR_INVALID_ARG, "the program's output 'logits' is not output '%s', which the classifier "
                         "would name so", name);
    cn_value labels = cn_input(p, "labels", 1, (const int64_t[]){CN_BATCH}, CN_I32);
    if (have_logits < 0) cn_output(p, "logits", logits);
    if (cn_program_find_output(p, "probabilities") < 0) cn_output(p, "probabilities", cn_op_softmax(p, logits));
    cn_output(p, "correct", cn_op_accuracy(p, logits, labels));
    cn_set_loss(p, cn_op_cross_entropy(p, logits, labels));
    return cn_program_status(p);
}
