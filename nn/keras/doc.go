// Package keras reads a model's architecture from the JSON Keras writes,
// as an nn.Architecture that meshtrain trains: model.to_json() of tf.keras
// 2.x and of Keras 3, a TensorFlow.js layers model's model.json, and
// Keras ≤ 2.2's list-shaped Sequential config.
//
// The forms it reads, and where they are defined:
//
//   - tf.keras 2.x to_json: {"class_name": "Sequential", "config": {"name",
//     "layers": [{"class_name", "config"}, …]}, "keras_version",
//     "backend"}, the layers' configs from each layer's get_config (the
//     InputLayer's "batch_input_shape", or the first layer's), shapes and
//     tuples as JSON lists (tensorflow/python/keras/engine/sequential.py,
//     training.py's _updated_config).
//   - Keras 3 to_json (and tf.keras 2.13+): every object as
//     serialization_lib.serialize_keras_object writes it, {"module",
//     "class_name", "config", "registered_name"} with "build_config"; the
//     InputLayer's "batch_shape"; a layer's "dtype" a DTypePolicy object
//     (keras/src/saving/serialization_lib.py, keras/src/models/
//     sequential.py, keras/src/layers/core/input_layer.py).
//   - A Functional model (class "Functional", or "Model" before
//     tf.keras 2.4): "layers" each with "name" and "inbound_nodes" (Keras
//     2: [[[layer, node, tensor, kwargs], …]]; Keras 3: [{"args": [a
//     "__keras_tensor__" with "keras_history": [layer, node, tensor]],
//     "kwargs"}]), "input_layers", "output_layers"
//     (keras/src/models/functional.py: get_config, serialize_node; a
//     merge's args[0] is the list of its tensors). A chain (each layer
//     taking the one before it) becomes a chain nn.Architecture, as a
//     Sequential does; any other DAG (one input, one output, each layer
//     called once, such as a residual block's Add or an Inception
//     block's Concatenate) an nn.Architecture with Inputs, which builds
//     an nn.Graph. TensorFlow.js's model.toJSON() is this form, with
//     class "Model" and keras_version "tfjs-layers …".
//   - A TensorFlow.js layers model, model.json: {"format": "layers-model",
//     "modelTopology": {"model_config": <the model as above>,
//     "keras_version", "backend", "training_config"}, "weightsManifest"}
//     as tensorflowjs_converter writes it, or "modelTopology" the model
//     config itself, as tfjs-layers' model.save writes it
//     (tfjs-converter's keras_h5_conversion.py; tfjs-layers' models.ts
//     and models_test.ts).
//   - Keras ≤ 2.2: a Sequential's "config" the list of its layers, the
//     first with "batch_input_shape" (tfjs-layers' models_test.ts
//     fakeMnistModel, keras_version 2.1.1).
//
// The layers and options read are Keras's: InputLayer; Conv2D (filters,
// kernel_size and strides, an int or a (height, width) pair,
// dilation_rate, padding, activation, use_bias, kernel_initializer,
// bias_initializer); DepthwiseConv2D (kernel_size, strides, padding,
// depth_multiplier, dilation_rate, activation, use_bias,
// depthwise_initializer, bias_initializer); SeparableConv2D (those and
// filters and pointwise_initializer); MaxPooling2D and AveragePooling2D
// (pool_size, strides, padding); GlobalAveragePooling2D and
// GlobalMaxPooling2D (keepdims); ZeroPadding2D (padding) and Cropping2D
// (cropping), an int, a (rows, columns) pair or ((top, bottom), (left,
// right)); UpSampling2D (size, interpolation nearest); Flatten; Reshape
// (target_shape); Dense (units, activation, use_bias true,
// initializers); Dropout (rate); Activation (activation); ReLU and
// Softmax with their defaults; BatchNormalization (axis −1, momentum,
// epsilon, center, scale, Keras's initial values); Rescaling (scale,
// offset); Normalization (axis −1 or null, mean and variance given in
// the config, invert); the merges Add, Subtract, Multiply, Average,
// Maximum, Minimum and Concatenate (axis; see merge.go); and the text
// layers, LeakyReLU, ELU, PReLU, LayerNormalization and the activations
// of layers1d.go. The one table from Keras's classes to nn's layers is
// classes (layers.go). Initializers: see nn.Initializer. Anything else
// (another layer, such as LSTM; channels_first; a regularizer or
// constraint; a Dense without bias; groups; bilinear up-sampling; a
// Normalization adapted with adapt(), whose mean and variance are in the
// weights file, not in the config; a dtype other than float32; a shared
// layer, a nested model, a second input or output) is refused with a
// LayerError naming the layer, its index and name, and what is
// supported. An option this package does not know is refused unless it
// has its off value (null, false, 0, empty).
//
// Model.Training reads the training settings a file records, as Keras's
// compile(optimizer, loss) left them: Keras 3's "compile_config"
// (optimizer and loss each a name or a serialised object), tf.keras 2's
// "training_config" (an HDF5 model's attribute beside "model_config";
// tensorflowjs_converter puts it in "modelTopology"), TF.js's
// "trainingConfig" (model.save with includeOptimizer: camelCase
// optimizer keys, snake_case losses). SGD (with momentum and nesterov),
// TF.js's Momentum and Adam map to nn's optimizers; other adaptive
// optimizers (RMSprop, Adagrad, …) to Adam at their rate, noted; a
// learning-rate schedule to its initial rate, noted. The loss must be one
// of the cross-entropies, fitting the last activation.
//
// A Keras layer becomes one nn layer, two when it has an activation (a
// Conv2D with activation relu is nn's Conv2D then Activation relu), none
// for an InputLayer; Model.Layers records which, and the nn layers'
// indices are those of the torch.nn.Sequential built from the same
// layers (Conv2d, ReLU, …), whose state_dict names the tensors as
// meshtrain's checkpoints do ("0.weight").
//
// Weights. A Keras layer's weights are the tensors of the nn layers it
// became, First … End−1 in Model.Layers, named by those indices:
//
//   - Conv2D: kernel [KH KW C F] is First.weight [F C KH KW] (PyTorch's
//     Conv2d), bias [F] First.bias (none when use_bias is false).
//   - DepthwiseConv2D: depthwise_kernel [KH KW C M] is First.weight
//     [C·M 1 KH KW] (PyTorch's Conv2d with groups C: output channel
//     c·M+m from input channel c), bias [C·M] First.bias.
//   - SeparableConv2D: two nn layers, a DepthwiseConv2D without bias and
//     a 1×1 Conv2D: depthwise_kernel [KH KW C M] is First.weight [C·M 1
//     KH KW], pointwise_kernel [1 1 C·M F] is (First+1).weight [F C·M 1
//     1], bias [F] (First+1).bias.
//   - Dense: kernel [I U] is First.weight [U I], bias First.bias.
//   - BatchNormalization: gamma, beta, moving_mean, moving_variance are
//     First.weight, First.bias and the buffers First.running_mean,
//     First.running_var.
//   - Rescaling and Normalization have none (Normalization's mean and
//     variance are in its nn spec).
package keras
