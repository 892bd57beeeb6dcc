// Package folder reads image folders, data.FormatImages: a folder of
// class folders of image files, as keras.utils.image_dataset_from_directory
// and torchvision's ImageFolder read them. It registers with data's
// opener (data.RegisterFormat) when imported.
package folder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	_ "image/gif" // registers GIF with image.Decode
	_ "image/jpeg"
	_ "image/png"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	_ "golang.org/x/image/bmp" // registers BMP

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/internal/inputfile"
	"go.uber.org/zap"
)

// maxImageFileBytes bounds one image file.
const maxImageFileBytes = 64 << 20

func init() {
	data.RegisterFormat(data.FormatImages, "a folder of class folders of image files (DIR/<class>/*.png|jpg|jpeg|gif|bmp)",
		func(path string, isDir bool, _ []byte) bool { return isDir && isImageFolder(path) }, Read)
}

// imageExts are the file name extensions an image folder's files have
// (any case), as image_dataset_from_directory's ALLOWLIST_FORMATS.
var imageExts = []string{".png", ".jpg", ".jpeg", ".gif", ".bmp"}

func isImageFile(name string) bool {
	return slices.Contains(imageExts, strings.ToLower(filepath.Ext(name)))
}

// imageFile is one example of an image folder: its path relative to the
// folder (slash-separated, the split's hash key) and class id.
type imageFile struct {
	rel   string
	class int
}

// isImageFolder says whether dir holds class folders (directly or under
// train/): a subdirectory with an image file in it.
func isImageFolder(dir string) bool {
	root := dir
	if st, err := os.Stat(filepath.Join(dir, "train")); err == nil && st.IsDir() {
		root = filepath.Join(dir, "train")
	}
	classes, err := os.ReadDir(root)
	if err != nil {
		return false
	}
	for _, c := range classes {
		files, _ := os.ReadDir(filepath.Join(root, c.Name())) // a class folder or a link to one; nothing for a file
		for _, f := range files {
			if !f.IsDir() && isImageFile(f.Name()) {
				return true
			}
		}
	}
	return false
}

// listClasses returns the class folders of root, sorted (Go's byte
// order, as Python's sorted() orders str), and each one's image files
// below it (recursively, sorted), paths relative to base. An empty class
// folder is an error naming it.
func listClasses(base, root string) ([]string, [][]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, nil, fmt.Errorf("image folder: %w", err)
	}
	var names []string
	var files [][]string
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		// A class folder may be a symbolic link (to a folder elsewhere):
		// walked from where it points, its files named under the link.
		walk, err := filepath.EvalSymlinks(dir)
		if st, serr := os.Stat(walk); err != nil || serr != nil || !st.IsDir() {
			continue
		}
		relDir, _ := filepath.Rel(base, dir)
		var list []string
		err = filepath.WalkDir(walk, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && isImageFile(d.Name()) {
				rel, _ := filepath.Rel(walk, p)
				list = append(list, filepath.ToSlash(filepath.Join(relDir, rel)))
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("image folder %s: %w", dir, err)
		}
		if len(list) == 0 {
			return nil, nil, fmt.Errorf("class folder %s holds no image files (%s): remove it, or put its images in it", dir, strings.Join(imageExts, ", "))
		}
		slices.Sort(list)
		names = append(names, e.Name())
		files = append(files, list)
	}
	if len(names) < 2 {
		return nil, nil, fmt.Errorf("image folder %s has %d class folder(s): want at least 2 (DIR/<class>/*.png …)", root, len(names))
	}
	return names, files, nil
}

// Read reads an image folder (data.FormatImages): DIR/train/<class>
// and DIR/test/<class> when DIR has train/ and test/, else DIR/<class>
// split by opts.Read.ValidationSplit. Classes are the training split's
// folder names, sorted; a test folder of another name is an error. Each
// image is decoded, converted to the colour mode and resized to
// ImageSize; only the peer's training shard is decoded when
// opts.Read.Shard is set (and SkipCorrupt is not: which files are skipped
// must be agreed, so every peer then decodes every file).
func Read(ctx context.Context, dir string, opts data.ImageOptions) (*data.ImageSet, error) {
	ro := opts.Read
	log := opts.MNIST.Logger
	if log == nil {
		log = zap.NewNop()
	}
	var train, test []imageFile
	var names []string
	trainDir, testDir := filepath.Join(dir, "train"), filepath.Join(dir, "test")
	if st, err := os.Stat(trainDir); err == nil && st.IsDir() {
		if st, err := os.Stat(testDir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("image folder %s has train/ but no test/: add test/<class>/ folders, or put the class folders in %s itself and give --validation-split", dir, dir)
		}
		n, files, err := listClasses(dir, trainDir)
		if err != nil {
			return nil, err
		}
		names = n
		for c, list := range files {
			for _, rel := range list {
				train = append(train, imageFile{rel, c})
			}
		}
		tn, tfiles, err := listClasses(dir, testDir)
		if err != nil {
			return nil, err
		}
		for i, name := range tn {
			c := slices.Index(names, name)
			if c < 0 {
				return nil, fmt.Errorf("image folder %s: class folder %s is not among train/'s classes (%s): the splits must name the same classes", dir, filepath.Join(testDir, name), strings.Join(names, ", "))
			}
			for _, rel := range tfiles[i] {
				test = append(test, imageFile{rel, c})
			}
		}
	} else {
		if ro.ValidationSplit <= 0 {
			return nil, fmt.Errorf("image folder %s has no test split: give --validation-split F (e.g. 0.2) to hold out that fraction, or lay it out as %s/train/<class>/ and %s/test/<class>/", dir, dir, dir)
		}
		n, files, err := listClasses(dir, dir)
		if err != nil {
			return nil, err
		}
		names = n
		for c, list := range files {
			for _, rel := range list {
				if data.HeldOut(rel, ro.SplitSeed, ro.ValidationSplit) {
					test = append(test, imageFile{rel, c})
				} else {
					train = append(train, imageFile{rel, c})
				}
			}
		}
		if len(train) == 0 || len(test) == 0 {
			return nil, fmt.Errorf("image folder %s: --validation-split %v leaves %d training and %d test images: want some of each", dir, ro.ValidationSplit, len(train), len(test))
		}
	}
	if len(names) > data.MaxClasses {
		return nil, fmt.Errorf("image folder %s has %d classes: at most %d (labels are bytes)", dir, len(names), data.MaxClasses)
	}
	channels := 3
	if ro.ColorMode == data.ColorGrayscale {
		channels = 1
	}
	size := ro.ImageSize
	if size == [2]int{} { // the first training image's, from its header (with SkipCorrupt: the first that has one)
		var err error
		for _, f := range train {
			if size, err = imageSize(filepath.Join(dir, filepath.FromSlash(f.rel))); err == nil || !ro.SkipCorrupt {
				break
			}
		}
		if err != nil {
			return nil, err
		}
	}
	dec := folderDecoder{dir: dir, size: size, channels: channels, resize: ro.ImageSize != [2]int{}, skip: ro.SkipCorrupt, log: log}
	shard := ro.Shard
	if ro.SkipCorrupt {
		shard = data.Shard{}
	}
	tr, err := dec.decode(ctx, train, shard)
	if err != nil {
		return nil, err
	}
	te, err := dec.decode(ctx, test, data.Shard{})
	if err != nil {
		return nil, err
	}
	if tr.Shard.World > 1 {
		h := fnv.New64a()
		for _, f := range train {
			fmt.Fprintf(h, "%s %d\n", f.rel, f.class)
		}
		tr.Digest = fmt.Sprintf("image folder %x", h.Sum64())
	}
	return &data.ImageSet{Train: tr, Test: te, Dir: dir, Classes: len(names), ClassNames: names}, nil
}

// imageSize is the size of the image at path, from its header.
func imageSize(path string) ([2]int, error) {
	f, err := inputfile.Open(path)
	if err != nil {
		return [2]int{}, err
	}
	defer f.Close()
	cfg, _, err := image.DecodeConfig(f)
	if err != nil {
		return [2]int{}, fmt.Errorf("image %s: %w: %w (replace or remove the file, or give --skip-corrupt to skip it)", path, errCorrupt, err)
	}
	return [2]int{cfg.Height, cfg.Width}, nil
}

// folderDecoder decodes an image folder's files into Images.
type folderDecoder struct {
	dir      string
	size     [2]int
	channels int
	resize   bool
	skip     bool
	log      *zap.Logger
}

// errCorrupt marks a file that does not decode (skipped with SkipCorrupt).
var errCorrupt = errors.New("corrupt image")

// decode decodes the files of shard (all when World ≤ 1) into Images of
// len(files) examples. Resized images are stored as float32 (the values
// tf.image.resize gives, not rounded), others as bytes; both normalised
// x/255 (UnitNorm) unless the model normalises (see data.InputNorm).
func (d *folderDecoder) decode(ctx context.Context, files []imageFile, shard data.Shard) (*data.Images, error) {
	im := &data.Images{Rows: d.size[0], Cols: d.size[1], Channels: d.channels, Norm: data.UnitNorm, Shard: shard}
	if shard.World <= 1 {
		im.Shard = data.Shard{}
	}
	for i, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !im.Shard.Holds(i) {
			im.Labels = append(im.Labels, uint8(f.class))
			im.N++
			continue
		}
		path := filepath.Join(d.dir, filepath.FromSlash(f.rel))
		px, err := d.read(path)
		if errors.Is(err, errCorrupt) && d.skip {
			d.log.Warn("skipping an image that does not decode (--skip-corrupt)", zap.String("path", path), zap.Error(err))
			continue
		}
		if err != nil {
			return nil, err
		}
		if d.resize {
			im.Floats = append(im.Floats, px...)
		} else {
			for _, v := range px {
				im.Pixels = append(im.Pixels, uint8(v))
			}
		}
		im.Labels = append(im.Labels, uint8(f.class))
		im.N++
	}
	if im.N == 0 {
		return nil, fmt.Errorf("image folder %s: no image decoded", d.dir)
	}
	if im.Pixels == nil && im.Floats == nil { // a shard with no examples
		im.Pixels = []uint8{}
	}
	return im, nil
}

// read decodes one file into H×W×C values (channel-last) in [0, 255].
func (d *folderDecoder) read(path string) ([]float32, error) {
	b, err := inputfile.ReadFileMax(path, maxImageFileBytes)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", path, err)
	}
	img, err := decodeImage(b)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w: %w (replace or remove the file, or give --skip-corrupt to skip it)", path, errCorrupt, err)
	}
	r := img.Bounds()
	h, w := r.Dy(), r.Dx()
	if !d.resize && (h != d.size[0] || w != d.size[1]) {
		return nil, fmt.Errorf("image %s is %d×%d, the folder's first image %d×%d: give --image-size HxW to resize them all", path, h, w, d.size[0], d.size[1])
	}
	px := toChannels(img, d.channels)
	if d.resize {
		px = ResizeBilinear(px, h, w, d.channels, d.size[0], d.size[1])
	}
	return px, nil
}

// decodeImage decodes b, refusing a header larger than data.MaxImageSide and
// turning a decoder's panic (a decoder bug on hostile input) into an error.
func decodeImage(b []byte) (img image.Image, err error) {
	defer func() {
		if p := recover(); p != nil {
			img, err = nil, fmt.Errorf("decoder failed: %v", p)
		}
	}()
	cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	if cfg.Width < 1 || cfg.Height < 1 || cfg.Width > data.MaxImageSide || cfg.Height > data.MaxImageSide {
		return nil, fmt.Errorf("%d×%d pixels: want 1 to %d a side", cfg.Width, cfg.Height, data.MaxImageSide)
	}
	img, _, err = image.Decode(bytes.NewReader(b))
	return img, err
}

// toChannels converts img to c channels, channel-last, values 0..255: for
// 1, the luma Y = 0.299R + 0.587G + 0.114B (Go's color.GrayModel, JPEG's
// and libjpeg's weights); for 3, the colour without alpha (not composited
// on any background, as tf.io.decode_image with channels=3 drops it), a
// grey image repeated in the three.
func toChannels(img image.Image, c int) []float32 {
	r := img.Bounds()
	out := make([]float32, 0, r.Dx()*r.Dy()*c)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			px := img.At(x, y)
			if c == 1 {
				out = append(out, float32(color.GrayModel.Convert(px).(color.Gray).Y))
				continue
			}
			n := color.NRGBAModel.Convert(px).(color.NRGBA)
			out = append(out, float32(n.R), float32(n.G), float32(n.B))
		}
	}
	return out
}

// ResizeBilinear resizes an h×w×c image (channel-last) to oh×ow as
// tf.image.resize(method="bilinear", antialias=False) does, which is
// what keras.utils.image_dataset_from_directory calls: half-pixel
// centres (a destination pixel's source coordinate is (i+0.5)·h/oh −
// 0.5, floored at 0), the two nearest source pixels per axis (the upper
// clamped to the edge), weights by distance, values left unrounded.
// golang.org/x/image/draw's BiLinear is not used: it samples with a
// kernel whose support widens when shrinking (an antialiased resize), so
// its values differ from Keras's by more than rounding.
func ResizeBilinear(src []float32, h, w, c, oh, ow int) []float32 {
	if h == oh && w == ow {
		return src
	}
	out := make([]float32, oh*ow*c)
	sy, sx := float64(h)/float64(oh), float64(w)/float64(ow)
	for i := range oh {
		fy := max(0, (float64(i)+0.5)*sy-0.5)
		y0 := min(int(fy), h-1)
		y1 := min(y0+1, h-1)
		dy := float32(fy - float64(y0))
		for j := range ow {
			fx := max(0, (float64(j)+0.5)*sx-0.5)
			x0 := min(int(fx), w-1)
			x1 := min(x0+1, w-1)
			dx := float32(fx - float64(x0))
			for k := range c {
				tl, tr := src[(y0*w+x0)*c+k], src[(y0*w+x1)*c+k]
				bl, br := src[(y1*w+x0)*c+k], src[(y1*w+x1)*c+k]
				top := tl + (tr-tl)*dx
				bot := bl + (br-bl)*dx
				out[(i*ow+j)*c+k] = top + (bot-top)*dy
			}
		}
	}
	return out
}
