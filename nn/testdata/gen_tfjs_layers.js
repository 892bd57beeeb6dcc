// gen_tfjs_layers.js writes tfjs_layers.json, the fixture of
// TestLayersMatchTFJS: for each case, a TensorFlow.js layer (tfjs-layers,
// a Keras implementation meshtrain's authors did not write), the nn
// specs it corresponds to, an input, the layer's weights in Keras's
// layouts and what the layer computes, all channels last (H×W×C).
//
//   node gen_tfjs_layers.js /path/to/node_modules/@tensorflow/tfjs > tfjs_layers.json
const tf = require(process.argv[2] || '@tensorflow/tfjs');

// A fixed generator (mulberry32), so the fixture does not depend on
// tf.random's.
let state = 12345;
function rand() {
  state |= 0; state = (state + 0x6D2B79F5) | 0;
  let t = Math.imul(state ^ (state >>> 15), 1 | state);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296 * 2 - 1;
}
const values = (n) => Array.from({length: n}, () => Math.round(rand() * 1000) / 1000);
const size = (shape) => shape.reduce((a, b) => a * b, 1);

const cases = [
  ['conv2d_3x2_stride2x1_same_no_bias', [7, 6, 2], tf.layers.conv2d({filters: 3, kernelSize: [3, 2], strides: [2, 1], padding: 'same', useBias: false}),
    [{type: 'conv2d', filters: 3, kernel: 3, strides: 2, padding: 'same', init: 'he', kernel_w: 2, strides_w: 1, no_bias: true}]],
  ['conv2d_3_dilation2_same', [7, 8, 2], tf.layers.conv2d({filters: 2, kernelSize: 3, dilationRate: 2, padding: 'same'}),
    [{type: 'conv2d', filters: 2, kernel: 3, strides: 1, padding: 'same', init: 'he', dilation: 2}]],
  ['conv2d_3x1_dilation2x3_valid', [9, 8, 2], tf.layers.conv2d({filters: 2, kernelSize: [3, 2], dilationRate: [2, 3], padding: 'valid'}),
    [{type: 'conv2d', filters: 2, kernel: 3, strides: 1, padding: 'valid', init: 'he', kernel_w: 2, dilation: 2, dilation_w: 3}]],
  ['conv2d_3_stride2_same_even', [8, 7, 2], tf.layers.conv2d({filters: 2, kernelSize: 3, strides: 2, padding: 'same'}),
    [{type: 'conv2d', filters: 2, kernel: 3, strides: 2, padding: 'same', init: 'he'}]],
  ['depthwise_3_multiplier2_stride2_same', [7, 6, 3], tf.layers.depthwiseConv2d({kernelSize: 3, depthMultiplier: 2, strides: 2, padding: 'same'}),
    [{type: 'depthwise_conv2d', kernel: 3, strides: 2, multiplier: 2, padding: 'same', init: 'he'}]],
  // tfjs-layers' DepthwiseConv2D ignores dilation_rate ("TODO(cais): Add
  // support for dilation"), so a dilated one is not a case here
  // (TestDepthwiseMatchesGroupedConv checks it against its definition).
  ['depthwise_2x3_valid_no_bias', [7, 6, 2], tf.layers.depthwiseConv2d({kernelSize: [2, 3], useBias: false}),
    [{type: 'depthwise_conv2d', kernel: 2, strides: 1, multiplier: 1, padding: 'valid', init: 'he', kernel_w: 3, no_bias: true}]],
  ['separable_3_multiplier2_same', [6, 5, 2], tf.layers.separableConv2d({filters: 4, kernelSize: 3, depthMultiplier: 2, padding: 'same'}),
    [{type: 'depthwise_conv2d', kernel: 3, strides: 1, multiplier: 2, padding: 'same', init: 'he', no_bias: true},
     {type: 'conv2d', filters: 4, kernel: 1, strides: 1, padding: 'valid', init: 'he'}]],
  ['zero_padding2d', [3, 4, 2], tf.layers.zeroPadding2d({padding: [[1, 2], [0, 3]]}),
    [{type: 'zero_padding2d', top: 1, bottom: 2, left: 0, right: 3}]],
  ['cropping2d', [6, 5, 2], tf.layers.cropping2D({cropping: [[1, 0], [2, 1]]}),
    [{type: 'cropping2d', top: 1, bottom: 0, left: 2, right: 1}]],
  ['up_sampling2d', [2, 3, 2], tf.layers.upSampling2d({size: [2, 3]}),
    [{type: 'up_sampling2d', size_h: 2, size_w: 3}]],
  ['global_average_pooling2d', [3, 5, 4], tf.layers.globalAveragePooling2d({}),
    [{type: 'global_average_pooling2d'}]],
  ['global_max_pooling2d', [3, 5, 4], tf.layers.globalMaxPooling2d({}),
    [{type: 'global_max_pooling2d'}]],
  ['rescaling', [3, 2, 2], tf.layers.rescaling({scale: 1 / 255, offset: -0.5}),
    [{type: 'rescaling', scale: 1 / 255, offset: -0.5}]],
];

const out = [];
for (const [name, shape, layer, specs] of cases) {
  const x = values(size(shape));
  const input = tf.tensor(x, [1, ...shape]);
  layer.apply(input); // builds the weights
  const weights = layer.getWeights().map((w) => ({shape: w.shape, values: values(size(w.shape))}));
  layer.setWeights(weights.map((w) => tf.tensor(w.values, w.shape)));
  const y = layer.apply(input);
  out.push({name, specs, input_shape: shape, input: x, weights, output_shape: y.shape.slice(1), output: Array.from(y.dataSync())});
}
console.log(JSON.stringify({generated_by: 'TensorFlow.js ' + tf.version.tfjs, cases: out}));
