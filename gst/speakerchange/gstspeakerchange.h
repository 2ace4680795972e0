// The speakerchange element: a passthrough audio analyser that announces speaker changes. GObject
// glue only; everything that computes lives in core/ (WindowBuffer, SharedSegmenterChannel).
#pragma once

#include <gst/audio/gstaudiofilter.h>
#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_SPEAKER_CHANGE (gst_speaker_change_get_type())
G_DECLARE_FINAL_TYPE(GstSpeakerChange, gst_speaker_change, GST, SPEAKER_CHANGE, GstAudioFilter)

/**
 * GstSpeakerChangeEngine:
 * @GST_SPEAKER_CHANGE_ENGINE_AUTO: the best engine this build has (the CPU engine here)
 * @GST_SPEAKER_CHANGE_ENGINE_CPU: the CPU engine (oneDNN)
 * @GST_SPEAKER_CHANGE_ENGINE_CUDA: the CUDA engine (cuDNN); needs a build with -Dcuda=enabled
 * @GST_SPEAKER_CHANGE_ENGINE_REMOTE: an Open Inference Protocol server (#GstSpeakerChange:server:
 *   NVIDIA Triton, KServe); needs a build with -Dremote=enabled
 */
typedef enum {
  GST_SPEAKER_CHANGE_ENGINE_AUTO,
  GST_SPEAKER_CHANGE_ENGINE_CPU,
  GST_SPEAKER_CHANGE_ENGINE_CUDA,
  GST_SPEAKER_CHANGE_ENGINE_REMOTE,
} GstSpeakerChangeEngine;

/**
 * GstSpeakerChangeMode:
 * @GST_SPEAKER_CHANGE_MODE_AUTO: latency for a live upstream, throughput otherwise
 * @GST_SPEAKER_CHANGE_MODE_LATENCY: one window per inference, as soon as it is complete
 * @GST_SPEAKER_CHANGE_MODE_THROUGHPUT: up to #GstSpeakerChange:batch-size windows per inference
 */
typedef enum {
  GST_SPEAKER_CHANGE_MODE_AUTO,
  GST_SPEAKER_CHANGE_MODE_LATENCY,
  GST_SPEAKER_CHANGE_MODE_THROUGHPUT,
} GstSpeakerChangeMode;

/**
 * GstSpeakerChangeLstmAlgorithm:
 * @GST_SPEAKER_CHANGE_LSTM_ALGORITHM_AUTO: let the engine choose
 * @GST_SPEAKER_CHANGE_LSTM_ALGORITHM_STANDARD: cuDNN's standard RNN algorithm
 * @GST_SPEAKER_CHANGE_LSTM_ALGORITHM_PERSIST_STATIC_SMALL_H: cuDNN's persistent kernel for small
 *   hidden sizes
 * @GST_SPEAKER_CHANGE_LSTM_ALGORITHM_PERSIST_DYNAMIC: cuDNN's dynamically compiled persistent
 * kernel
 */
typedef enum {
  GST_SPEAKER_CHANGE_LSTM_ALGORITHM_AUTO,
  GST_SPEAKER_CHANGE_LSTM_ALGORITHM_STANDARD,
  GST_SPEAKER_CHANGE_LSTM_ALGORITHM_PERSIST_STATIC_SMALL_H,
  GST_SPEAKER_CHANGE_LSTM_ALGORITHM_PERSIST_DYNAMIC,
} GstSpeakerChangeLstmAlgorithm;

/**
 * GstSpeakerChangePrecision:
 * @GST_SPEAKER_CHANGE_PRECISION_FP32: every product in fp32
 * @GST_SPEAKER_CHANGE_PRECISION_BF16: the CPU engine's LSTM products in bf16 (CPUs with
 *   AVX512_BF16 only)
 */
typedef enum {
  GST_SPEAKER_CHANGE_PRECISION_FP32,
  GST_SPEAKER_CHANGE_PRECISION_BF16,
} GstSpeakerChangePrecision;

#define GST_TYPE_SPEAKER_CHANGE_ENGINE (gst_speaker_change_engine_get_type())
GType gst_speaker_change_engine_get_type(void);
#define GST_TYPE_SPEAKER_CHANGE_MODE (gst_speaker_change_mode_get_type())
GType gst_speaker_change_mode_get_type(void);
#define GST_TYPE_SPEAKER_CHANGE_LSTM_ALGORITHM (gst_speaker_change_lstm_algorithm_get_type())
GType gst_speaker_change_lstm_algorithm_get_type(void);
#define GST_TYPE_SPEAKER_CHANGE_PRECISION (gst_speaker_change_precision_get_type())
GType gst_speaker_change_precision_get_type(void);

GST_ELEMENT_REGISTER_DECLARE(speakerchange);

G_END_DECLS
