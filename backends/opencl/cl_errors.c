/* OpenCL and CLBlast status codes by name, so every message says what failed and how. */
#include <stdio.h>

#include "cl_internal.h"

/* Listed by value rather than through the CL_* macros, so codes that newer headers add (or
 * older ones lack) still get a name wherever the library was built. */
static const struct {
    int code;
    const char *name;
} cl_errors[] = {
    {0, "CL_SUCCESS"},
    {-1, "CL_DEVICE_NOT_FOUND"},
    {-2, "CL_DEVICE_NOT_AVAILABLE"},
    {-3, "CL_COMPILER_NOT_AVAILABLE"},
    {-4, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
    {-5, "CL_OUT_OF_RESOURCES"},
    {-6, "CL_OUT_OF_HOST_MEMORY"},
    {-7, "CL_PROFILING_INFO_NOT_AVAILABLE"},
    {-8, "CL_MEM_COPY_OVERLAP"},
    {-9, "CL_IMAGE_FORMAT_MISMATCH"},
    {-10, "CL_IMAGE_FORMAT_NOT_SUPPORTED"},
    {-11, "CL_BUILD_PROGRAM_FAILURE"},
    {-12, "CL_MAP_FAILURE"},
    {-13, "CL_MISALIGNED_SUB_BUFFER_OFFSET"},
    {-14, "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"},
    {-15, "CL_COMPILE_PROGRAM_FAILURE"},
    {-16, "CL_LINKER_NOT_AVAILABLE"},
    {-17, "CL_LINK_PROGRAM_FAILURE"},
    {-18, "CL_DEVICE_PARTITION_FAILED"},
    {-19, "CL_KERNEL_ARG_INFO_NOT_AVAILABLE"},
    {-30, "CL_INVALID_VALUE"},
    {-31, "CL_INVALID_DEVICE_TYPE"},
    {-32, "CL_INVALID_PLATFORM"},
    {-33, "CL_INVALID_DEVICE"},
    {-34, "CL_INVALID_CONTEXT"},
    {-35, "CL_INVALID_QUEUE_PROPERTIES"},
    {-36, "CL_INVALID_COMMAND_QUEUE"},
    {-37, "CL_INVALID_HOST_PTR"},
    {-38, "CL_INVALID_MEM_OBJECT"},
    {-39, "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR"},
    {-40, "CL_INVALID_IMAGE_SIZE"},
    {-41, "CL_INVALID_SAMPLER"},
    {-42, "CL_INVALID_BINARY"},
    {-43, "CL_INVALID_BUILD_OPTIONS"},
    {-44, "CL_INVALID_PROGRAM"},
    {-45, "CL_INVALID_PROGRAM_EXECUTABLE"},
    {-46, "CL_INVALID_KERNEL_NAME"},
    {-47, "CL_INVALID_KERNEL_DEFINITION"},
    {-48, "CL_INVALID_KERNEL"},
    {-49, "CL_INVALID_ARG_INDEX"},
    {-50, "CL_INVALID_ARG_VALUE"},
    {-51, "CL_INVALID_ARG_SIZE"},
    {-52, "CL_INVALID_KERNEL_ARGS"},
    {-53, "CL_INVALID_WORK_DIMENSION"},
    {-54, "CL_INVALID_WORK_GROUP_SIZE"},
    {-55, "CL_INVALID_WORK_ITEM_SIZE"},
    {-56, "CL_INVALID_GLOBAL_OFFSET"},
    {-57, "CL_INVALID_EVENT_WAIT_LIST"},
    {-58, "CL_INVALID_EVENT"},
    {-59, "CL_INVALID_OPERATION"},
    {-60, "CL_INVALID_GL_OBJECT"},
    {-61, "CL_INVALID_BUFFER_SIZE"},
    {-62, "CL_INVALID_MIP_LEVEL"},
    {-63, "CL_INVALID_GLOBAL_WORK_SIZE"},
    {-64, "CL_INVALID_PROPERTY"},
    {-65, "CL_INVALID_IMAGE_DESCRIPTOR"},
    {-66, "CL_INVALID_COMPILER_OPTIONS"},
    {-67, "CL_INVALID_LINKER_OPTIONS"},
    {-68, "CL_INVALID_DEVICE_PARTITION_COUNT"},
    {-69, "CL_INVALID_PIPE_SIZE"},
    {-70, "CL_INVALID_DEVICE_QUEUE"},
    {-71, "CL_INVALID_SPEC_ID"},
    {-72, "CL_MAX_SIZE_RESTRICTION_EXCEEDED"},
    {-1000, "CL_INVALID_GL_SHAREGROUP_REFERENCE_KHR"},
    {-1001, "CL_PLATFORM_NOT_FOUND_KHR"},
    {-1002, "CL_INVALID_D3D10_DEVICE_KHR"},
    {-1003, "CL_INVALID_D3D10_RESOURCE_KHR"},
    {-1004, "CL_D3D10_RESOURCE_ALREADY_ACQUIRED_KHR"},
    {-1005, "CL_D3D10_RESOURCE_NOT_ACQUIRED_KHR"},
    {-1006, "CL_INVALID_D3D11_DEVICE_KHR"},
    {-1007, "CL_INVALID_D3D11_RESOURCE_KHR"},
    {-1008, "CL_D3D11_RESOURCE_ALREADY_ACQUIRED_KHR"},
    {-1009, "CL_D3D11_RESOURCE_NOT_ACQUIRED_KHR"},
    {-1010, "CL_INVALID_DX9_MEDIA_ADAPTER_KHR"},
    {-1011, "CL_INVALID_DX9_MEDIA_SURFACE_KHR"},
    {-1012, "CL_DX9_MEDIA_SURFACE_ALREADY_ACQUIRED_KHR"},
    {-1013, "CL_DX9_MEDIA_SURFACE_NOT_ACQUIRED_KHR"},
    {-1057, "CL_DEVICE_PARTITION_FAILED_EXT"},
    {-1058, "CL_INVALID_PARTITION_COUNT_EXT"},
    {-1059, "CL_INVALID_PARTITION_NAME_EXT"},
    {-1092, "CL_EGL_RESOURCE_NOT_ACQUIRED_KHR"},
    {-1093, "CL_INVALID_EGL_OBJECT_KHR"},
    {-1094, "CL_INVALID_ACCELERATOR_INTEL"},
    {-1095, "CL_INVALID_ACCELERATOR_TYPE_INTEL"},
    {-1096, "CL_INVALID_ACCELERATOR_DESCRIPTOR_INTEL"},
    {-1097, "CL_ACCELERATOR_TYPE_NOT_SUPPORTED_INTEL"},
    {-1098, "CL_INVALID_VA_API_MEDIA_ADAPTER_INTEL"},
    {-1099, "CL_INVALID_VA_API_MEDIA_SURFACE_INTEL"},
    {-1100, "CL_VA_API_MEDIA_SURFACE_ALREADY_ACQUIRED_INTEL"},
    {-1101, "CL_VA_API_MEDIA_SURFACE_NOT_ACQUIRED_INTEL"},
    {-1108, "CL_COMMAND_TERMINATED_ITSELF_WITH_FAILURE_ARM"},
    {-1121, "CL_CONTEXT_TERMINATED_KHR"},
    {-1138, "CL_INVALID_COMMAND_BUFFER_KHR"},
    {-1139, "CL_INVALID_SYNC_POINT_WAIT_LIST_KHR"},
    {-1140, "CL_INCOMPATIBLE_COMMAND_QUEUE_KHR"},
    {-1141, "CL_INVALID_MUTABLE_COMMAND_KHR"},
    {-1142, "CL_INVALID_SEMAPHORE_KHR"},
    {-9999, "CL_NV_ILLEGAL_MEMORY_ACCESS"},
};

const char *cn_cl_error_name(cl_int err) {
    for (size_t i = 0; i < sizeof cl_errors / sizeof cl_errors[0]; i++)
        if (cl_errors[i].code == err) return cl_errors[i].name;
    return "unknown OpenCL error";
}

static const struct {
    int code;
    const char *name;
} blast_errors[] = {
    {0, "CLBlastSuccess"},
    {-3, "CLBlastOpenCLCompilerNotAvailable"},
    {-4, "CLBlastTempBufferAllocFailure"},
    {-5, "CLBlastOpenCLOutOfResources"},
    {-6, "CLBlastOpenCLOutOfHostMemory"},
    {-11, "CLBlastOpenCLBuildProgramFailure"},
    {-30, "CLBlastInvalidValue"},
    {-36, "CLBlastInvalidCommandQueue"},
    {-38, "CLBlastInvalidMemObject"},
    {-42, "CLBlastInvalidBinary"},
    {-43, "CLBlastInvalidBuildOptions"},
    {-44, "CLBlastInvalidProgram"},
    {-45, "CLBlastInvalidProgramExecutable"},
    {-46, "CLBlastInvalidKernelName"},
    {-47, "CLBlastInvalidKernelDefinition"},
    {-48, "CLBlastInvalidKernel"},
    {-49, "CLBlastInvalidArgIndex"},
    {-50, "CLBlastInvalidArgValue"},
    {-51, "CLBlastInvalidArgSize"},
    {-52, "CLBlastInvalidKernelArgs"},
    {-53, "CLBlastInvalidLocalNumDimensions"},
    {-54, "CLBlastInvalidLocalThreadsTotal"},
    {-55, "CLBlastInvalidLocalThreadsDim"},
    {-56, "CLBlastInvalidGlobalOffset"},
    {-57, "CLBlastInvalidEventWaitList"},
    {-58, "CLBlastInvalidEvent"},
    {-59, "CLBlastInvalidOperation"},
    {-61, "CLBlastInvalidBufferSize"},
    {-63, "CLBlastInvalidGlobalWorkSize"},
    {-1024, "CLBlastNotImplemented"},
    {-1022, "CLBlastInvalidMatrixA"},
    {-1021, "CLBlastInvalidMatrixB"},
    {-1020, "CLBlastInvalidMatrixC"},
    {-1019, "CLBlastInvalidVectorX"},
    {-1018, "CLBlastInvalidVectorY"},
    {-1017, "CLBlastInvalidDimension"},
    {-1016, "CLBlastInvalidLeadDimA"},
    {-1015, "CLBlastInvalidLeadDimB"},
    {-1014, "CLBlastInvalidLeadDimC"},
    {-1013, "CLBlastInvalidIncrementX"},
    {-1012, "CLBlastInvalidIncrementY"},
    {-1011, "CLBlastInsufficientMemoryA"},
    {-1010, "CLBlastInsufficientMemoryB"},
    {-1009, "CLBlastInsufficientMemoryC"},
    {-1008, "CLBlastInsufficientMemoryX"},
    {-1007, "CLBlastInsufficientMemoryY"},
    {-2050, "CLBlastInsufficientMemoryTemp"},
    {-2049, "CLBlastInvalidBatchCount"},
    {-2048, "CLBlastInvalidOverrideKernel"},
    {-2047, "CLBlastMissingOverrideParameter"},
    {-2046, "CLBlastInvalidLocalMemUsage"},
    {-2045, "CLBlastNoHalfPrecision"},
    {-2044, "CLBlastNoDoublePrecision"},
    {-2043, "CLBlastInvalidVectorScalar"},
    {-2042, "CLBlastInsufficientMemoryScalar"},
    {-2041, "CLBlastDatabaseError"},
    {-2040, "CLBlastUnknownError"},
    {-2039, "CLBlastUnexpectedError"},
};

const char *cn_clblast_status_name(int status) {
    for (size_t i = 0; i < sizeof blast_errors / sizeof blast_errors[0]; i++)
        if (blast_errors[i].code == status) return blast_errors[i].name;
    return "unknown CLBlast status";
}

cn_status cn_cl_fail(const char *device, const char *call, cl_int err) {
    /* Allocation failures are the user's sizing problem, not a driver bug: report them as
     * out-of-memory so callers can react (smaller batch, lower cap). */
    cn_status s = (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY)
                      ? CN_ERR_OUT_OF_MEMORY
                      : CN_ERR_OPENCL;
    return cn_errorf(s, "%s failed: %s (%d) on OpenCL device '%s'", call, cn_cl_error_name(err),
                     (int)err, device ? device : "?");
}
